//go:build !quiver_lean

package main

// Every model provider registers itself with model.Open by import. A build with
// -tags quiver_lean leaves the providers' SDKs out (see models_lean.go).
import _ "github.com/quiverhq/quiver/model/all"
