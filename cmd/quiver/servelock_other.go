//go:build !unix

package main

// lockServing does nothing where flock is missing: there, keep to one quiver serve per
// database yourself.
func lockServing(string) (release func(), err error) { return func() {}, nil }
