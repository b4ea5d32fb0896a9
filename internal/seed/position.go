package seed

import (
	"fmt"

	"gopkg.in/yaml.v3"
)

// pos is where something was declared: the line of its mapping and the
// value node of each of its fields, so that a problem can name the line of
// the value at fault.
type pos struct {
	line   int
	fields map[string]*yaml.Node
}

// newPos records the position of node, a mapping (or, for an empty item, a
// scalar).
func newPos(node *yaml.Node) pos {
	p := pos{line: node.Line, fields: map[string]*yaml.Node{}}
	if node.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(node.Content); i += 2 {
			p.fields[node.Content[i].Value] = node.Content[i+1]
		}
	}
	return p
}

// at is the line of field's value, or of the declaration when the field is
// absent.
func (p pos) at(field string) int {
	if n := p.fields[field]; n != nil {
		return n.Line
	}
	return p.line
}

// prefix is "line N: ", or "" for a declaration not read from a file.
func (p pos) prefix() string {
	if p.line == 0 {
		return ""
	}
	return fmt.Sprintf("line %d: ", p.line)
}

// item is the line of the i-th element of a list field.
func (p pos) item(field string, i int) int {
	if n := p.fields[field]; n != nil && n.Kind == yaml.SequenceNode && i < len(n.Content) {
		return n.Content[i].Line
	}
	return p.at(field)
}

// tag is the resolved YAML tag of field's value ("" when absent).
func (p pos) tag(field string) string {
	if n := p.fields[field]; n != nil {
		return n.ShortTag()
	}
	return ""
}

// items returns the elements of a sequence node (nil for anything else,
// such as a null list).
func items(n *yaml.Node) []*yaml.Node {
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil
	}
	return n.Content
}

// locate records where each tenant and key of s was declared. doc is the
// node tree of the document s was decoded from, so the shapes agree.
func (s *Seed) locate(doc *yaml.Node) {
	root := doc
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	tenants := items(newPos(root).fields["tenants"])
	for i := range s.Tenants {
		if i >= len(tenants) {
			break
		}
		t := &s.Tenants[i]
		t.pos = newPos(tenants[i])
		keys := items(t.pos.fields["keys"])
		for j := range t.Keys {
			if j < len(keys) {
				t.Keys[j].pos = newPos(keys[j])
			}
		}
	}
}
