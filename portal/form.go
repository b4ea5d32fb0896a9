package portal

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/internal/ids"
	"github.com/tollgate-dev/tollgate/server/keys"
)

// keyForm is the create-key form as the administrator filled it in, kept
// to show it again beside what is wrong with it.
type keyForm struct {
	Label       string
	AllModels   bool
	Models      []string // ticked among the models being served
	OtherModels string
	RPM         string
	TPD         string
	MaxOutput   string // the most completion tokens a reply; 0: none
	Tools       string
	Expires     string // YYYY-MM-DD, UTC; empty: never
	// Errors by field name ("label", "models", "rpm", "tpd",
	// "max_output_tokens", "tools", "expires").
	Errors map[string]string
}

func (f *keyForm) bad(field, msg string) {
	if f.Errors == nil {
		f.Errors = make(map[string]string)
	}
	if _, ok := f.Errors[field]; !ok {
		f.Errors[field] = msg
	}
}

// Ticked reports whether model was ticked (for the template).
func (f *keyForm) Ticked(model string) bool { return slices.Contains(f.Models, model) }

// newKeyForm is the form as first shown: all models, no limits.
func newKeyForm() *keyForm { return &keyForm{AllModels: true, RPM: "0", TPD: "0", MaxOutput: "0"} }

// splitList splits on commas and white space, dropping empty items.
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' })
}

// parseKeyForm reads the posted form into a key spec for tenant; the spec
// is nil when the form has errors, which are then in the returned form.
func parseKeyForm(v url.Values, tenant string, now time.Time) (*keyForm, *keys.Spec) {
	f := &keyForm{
		Label:       strings.TrimSpace(v.Get("label")),
		AllModels:   v.Get("models") != "some",
		Models:      v["model"],
		OtherModels: v.Get("other_models"),
		RPM:         strings.TrimSpace(v.Get("rpm")),
		TPD:         strings.TrimSpace(v.Get("tpd")),
		MaxOutput:   strings.TrimSpace(v.Get("max_output_tokens")),
		Tools:       v.Get("tools"),
		Expires:     strings.TrimSpace(v.Get("expires")),
	}
	spec := &keys.Spec{TenantID: tenant, Label: f.Label, AllModels: f.AllModels}
	if !keys.ValidLabel(f.Label) {
		f.bad("label", "A label has 1 to 128 characters.")
	}
	if !f.AllModels {
		seen := map[string]bool{}
		for _, m := range append(slices.Clone(f.Models), splitList(f.OtherModels)...) {
			if seen[m] {
				continue
			}
			seen[m] = true
			if !ids.ValidModel(m) {
				f.bad("models", "“"+m+"” is not a model id (namespace/model).")
			}
			spec.Models = append(spec.Models, m)
		}
		switch {
		case len(spec.Models) == 0:
			f.bad("models", "Tick at least one model, name one, or allow all models.")
		case len(spec.Models) > 256:
			f.bad("models", "A key allows at most 256 models by name.")
		}
	}
	spec.RPM = parseLimit(f, "rpm", f.RPM, keys.MaxRPM)
	spec.TPD = parseLimit(f, "tpd", f.TPD, keys.MaxTPD)
	spec.MaxOutputTokens = parseLimit(f, "max_output_tokens", f.MaxOutput, keys.MaxOutputTokens)
	for _, t := range splitList(f.Tools) {
		s := "tool:" + strings.TrimPrefix(t, "tool:")
		if !keys.ValidScope(s) {
			f.bad("tools", "“"+t+"” is not a tool name (letters, digits, _ and -, up to 64) or *.")
			continue
		}
		if !slices.Contains(spec.Scopes, s) {
			spec.Scopes = append(spec.Scopes, s)
		}
	}
	if len(spec.Scopes) > 256 {
		f.bad("tools", "A key has at most 256 tool scopes.")
	}
	if f.Expires != "" {
		day, err := time.Parse(time.DateOnly, f.Expires)
		switch {
		case err != nil:
			f.bad("expires", "Give a date as YYYY-MM-DD.")
		case !day.After(now):
			f.bad("expires", "The expiry date must be after today (UTC).")
		default:
			spec.ExpireTime = day
		}
	}
	if len(f.Errors) > 0 {
		return f, nil
	}
	return f, spec
}

// parseLimit reads a limit field: a whole number up to max, 0 for none.
func parseLimit(f *keyForm, field, s string, max int64) int64 {
	if s == "" {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > max {
		f.bad(field, "A whole number up to "+formatInt(max)+", 0 for no limit.")
		return 0
	}
	return n
}
