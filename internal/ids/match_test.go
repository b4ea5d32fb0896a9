package ids

import (
	"regexp"
	"strings"
	"testing"
)

// matchers are the hand matchers beside the regular expressions they
// stand for.
var matchers = []struct {
	name  string
	match func(string) bool
	re    *regexp.Regexp
}{
	{"tenant", tenantFormat.match, tenantRE},
	{"key", keyFormat.match, keyRE},
	{"appliance", applianceFormat.match, applianceRE},
	{"request", requestFormat.match, requestRE},
	{"decision", decisionFormat.match, decisionRE},
	{"namespace", namespaceFormat.match, modelNamespaceRE},
	{"name", nameFormat.match, modelNameRE},
	{"model", matchModel, modelRE},
}

// idProbes are strings at the edges of every format: each prefix with
// every byte after it, and bodies at, under and over each length bound.
func idProbes() []string {
	probes := []string{"", "/", "a/", "/a", "a//b", "gpu/meta-llama/Llama-3.1-8B:fp8", "x\n", "é", "acme\x00"}
	for _, prefix := range []string{"", KeyPrefix, AppliancePrefix, RequestPrefix, DecisionPrefix, "KEY_", "ns/"} {
		for b := range 256 {
			probes = append(probes, prefix+string(rune(b)), prefix+"a"+string([]byte{byte(b)}), prefix+string([]byte{byte(b)})+"a")
		}
		for _, n := range []int{1, 62, 63, 64, 65, 191, 192, 193, 256} {
			for _, c := range []string{"a", "Z", "0", "-", "_", ".", ":", "/"} {
				probes = append(probes, prefix+strings.Repeat(c, n), prefix+"a"+strings.Repeat(c, n-1), prefix+"a"+strings.Repeat(c, n))
			}
		}
	}
	return probes
}

func TestMatchersAreTheRegexps(t *testing.T) {
	for _, m := range matchers {
		for _, s := range idProbes() {
			if got, want := m.match(s), m.re.MatchString(s); got != want {
				t.Errorf("%s: match(%q) = %v, the regexp says %v", m.name, s, got, want)
			}
			if m.name == "model" {
				// A model id is also a namespace, '/', and a name
				// made of any probe.
				for _, n := range []string{"gpu", "a", strings.Repeat("b", 64), strings.Repeat("b", 65)} {
					s := n + "/" + s
					if got, want := m.match(s), m.re.MatchString(s); got != want {
						t.Errorf("model: match(%q) = %v, the regexp says %v", s, got, want)
					}
				}
			}
		}
	}
}

func FuzzMatchersAreTheRegexps(f *testing.F) {
	for _, s := range idProbes()[:64] {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, m := range matchers {
			if got, want := m.match(s), m.re.MatchString(s); got != want {
				t.Errorf("%s: match(%q) = %v, the regexp says %v", m.name, s, got, want)
			}
		}
	})
}

func BenchmarkCheckRequest(b *testing.B) {
	id := NewRequest()
	b.ReportAllocs()
	for b.Loop() {
		if err := CheckRequest(id); err != nil {
			b.Fatal(err)
		}
	}
}
