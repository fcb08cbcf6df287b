// Package schemastat counts the JSON Schemas this process compiles, so that tests anywhere in
// the module can hold compilation to definition time: a call that compiled a schema
// would pay for it on every call, and nothing else would show it.
//
// It lives apart from the schema package because the tests that need it are those of the
// packages that import schema (the dispatcher's, the agents', the platform's), which an
// in-package test of schema cannot import without a cycle; being internal, it is no part of
// the public API.
package schemastat

import "sync/atomic"

// Compilations is incremented by the schema package each time it compiles a schema document.
var Compilations atomic.Int64
