package interop

import "sync"

var (
	builtOnce sync.Once
	built     string
	buildErr  error
)

type buildError struct {
	err    error
	output string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.output }
