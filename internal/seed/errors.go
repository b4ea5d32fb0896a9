package seed

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Error lists the problems of a seed file.
type Error struct {
	// File is the path given to Load; empty for Parse.
	File     string
	Problems []Problem
}

// Problem is one thing wrong at a line of the seed.
type Problem struct {
	Line int // 0 when YAML did not say
	Msg  string
}

func (p Problem) String() string {
	if p.Line == 0 {
		return p.Msg
	}
	return fmt.Sprintf("line %d: %s", p.Line, p.Msg)
}

// Error reads "seed FILE: line 3: ...; line 7: ...".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("seed")
	if e.File != "" {
		b.WriteString(" " + e.File)
	}
	for i, p := range e.Problems {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// errorOf returns problems as an *Error ordered by line, or nil.
func errorOf(problems []Problem) error {
	if len(problems) == 0 {
		return nil
	}
	slices.SortStableFunc(problems, func(a, b Problem) int { return a.Line - b.Line })
	return &Error{Problems: problems}
}

var (
	// yaml.v3 reports "yaml: line 3: ..." for syntax errors and
	// "line 3: ..." for each problem of a TypeError.
	yamlLineRe     = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
	unknownFieldRe = regexp.MustCompile(`^field (\S+) not found in type \S+$`)
)

// yamlError turns an error of the YAML decoder into an *Error.
func yamlError(err error) error {
	msgs := []string{err.Error()}
	if te := (*yaml.TypeError)(nil); errors.As(err, &te) {
		msgs = te.Errors
	}
	problems := make([]Problem, 0, len(msgs))
	for _, m := range msgs {
		p := Problem{Msg: strings.TrimPrefix(m, "yaml: ")}
		if g := yamlLineRe.FindStringSubmatch(m); g != nil {
			p.Line, _ = strconv.Atoi(g[1])
			p.Msg = g[2]
		}
		if g := unknownFieldRe.FindStringSubmatch(p.Msg); g != nil {
			p.Msg = fmt.Sprintf("unknown field %q", g[1])
		}
		problems = append(problems, p)
	}
	return errorOf(problems)
}
