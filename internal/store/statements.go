package store

import (
	"fmt"

	"github.com/claimlock/claimlock/internal/store/render"
)

// Rendered is one statement a store rendered: its name with the variant
// it was rendered for, its SQL text and its placeholders' names in order.
// The engines' golden files list them.
type Rendered struct {
	Name string
	SQL  string
	Args []string
}

// statements are the statements a store rendered from its table, by key,
// by the names [Claims.Statements] and [Leases.Statements] give them, and
// in the order they were rendered.
type statements[K comparable] struct {
	byKey    map[K]render.Stmt
	byName   map[string]render.Stmt
	rendered []Rendered
}

// get returns the statement of key k; its SQL is "" when the store has no
// such statement (the table's condition excluded it, or the engine has no
// template for it).
func (s *statements[K]) get(k K) render.Stmt { return s.byKey[k] }

// has reports whether the store has the statement of key k.
func (s *statements[K]) has(k K) bool { return s.byKey[k].SQL != "" }

// add renders src with data as the statement of key k, named name (with its
// variant) in the golden files and listed as listed in Statements ("":
// not listed).
func (s *statements[K]) add(b *Backend, k K, name, listed, src string, data any, textKeys bool) error {
	if s.byKey == nil {
		s.byKey, s.byName = map[K]render.Stmt{}, map[string]render.Stmt{}
	}
	st, err := b.style.Render(name, src, data, textKeys)
	if err != nil {
		return fmt.Errorf("%s: %w", b.drv.Name(), err)
	}
	s.byKey[k] = st
	if listed != "" {
		s.byName[listed] = st
	}
	s.rendered = append(s.rendered, Rendered{Name: name, SQL: st.SQL, Args: st.Names()})
	return nil
}

// sqlByName returns the listed statements' SQL by name.
func (s *statements[K]) sqlByName() map[string]string {
	m := map[string]string{}
	for k, st := range s.byName {
		m[k] = st.SQL
	}
	return m
}

// bind returns the listed statement name with its arguments taken from a.
func (s *statements[K]) bind(b *Backend, name string, a *render.Args) (query string, args []any, ok bool) {
	st, ok := s.byName[name]
	if !ok {
		return "", nil, false
	}
	query, args = st.Bind(b.style, a)
	return query, args, true
}
