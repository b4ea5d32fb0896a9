package portal

import (
	"bytes"
	"embed"
	"html/template"
	"net/http"
	"strconv"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static/portal.css
var stylesheet []byte

//go:embed static/favicon.svg
var favicon []byte

// pages are the portal's templates, each rendered inside layout.html.
type pages struct {
	byName map[string]*template.Template
}

func loadPages() *pages {
	p := &pages{byName: make(map[string]*template.Template)}
	for _, name := range []string{"login", "keys", "new", "created", "error", "account", "revoke", "twostep"} {
		p.byName[name] = template.Must(template.ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html"))
	}
	return p
}

// render writes page name with data and status. The page is rendered in
// full before anything is written, so that a template error is a 500,
// not half a page.
func (p *pages) render(w http.ResponseWriter, status int, name string, data any) {
	var buf bytes.Buffer
	if err := p.byName[name].ExecuteTemplate(&buf, "layout", data); err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// Every page's data has a Session, which is nil when nobody is signed in.

type loginData struct {
	Session             *session
	Tenant, User, Error string
}

type keysData struct {
	Session *session
	Keys    []keyRow
	Next    string
	Revoked string
}

type formData struct {
	Session *session
	Form    *keyForm
	Served  []string
}

type createdData struct {
	Session *session
	Key     keyRow
	Secret  string
}

type revokeData struct {
	Session *session
	Key     keyRow
}

type accountData struct {
	Session       *session
	Error, Notice string
}

type twoStepData struct {
	Session *session
	// On is whether the account has two-step sign-in; Required whether
	// the portal requires it.
	On, Required bool
	// Secret (in groups of four) and Link are the secret being set up,
	// when On is false.
	Secret, Link  string
	Error, Notice string
}

type errorData struct {
	Session *session
	Status  int
	Message string
}
