package server

import "github.com/quiverhq/quiver"

// annotationsOf is what the API answers of a tool's annotations: nil when it declares none.
func annotationsOf(sp quiver.Spec) *quiver.Annotations {
	if sp.Annotations.IsZero() {
		return nil
	}
	a := sp.Annotations.Clone()
	return &a
}
