package sandbox

import (
	"encoding/json"
	"time"
)

// Status is how a run ended.
type Status string

// The statuses of a run.
const (
	// StatusSuccess: the entry function returned (or its promise fulfilled) a value that could
	// be converted to JSON within the output limit.
	StatusSuccess Status = "success"
	// StatusError: the code threw (a syntax error included), returned something that is not
	// JSON or too large, or returned a promise that never settled.
	StatusError Status = "error"
	// StatusMemory: the code ran out of its memory limit (or built a string longer than the
	// engine allows).
	StatusMemory Status = "memory"
	// StatusLinkError: a module or import did not resolve, an import named something a module
	// does not export, or the named entry function does not exist.
	StatusLinkError Status = "link_error"
	// StatusTerminated: the run was stopped from outside: Terminate, its timeout or its
	// context. ErrorMessage says why.
	StatusTerminated Status = "terminated"
)

// Result is the outcome of a run.
type Result struct {
	Status Status `json:"status"`
	// Value is the entry function's result as JSON, on success.
	Value json.RawMessage `json:"value,omitempty"`
	// ErrorName is the class of the error ("TypeError", "SyntaxError", "InternalError"...),
	// or one of the sandbox's own: "LinkError", "OutputLimitError", "TerminatedError".
	ErrorName string `json:"error_name,omitempty"`
	// ErrorMessage says what went wrong.
	ErrorMessage string `json:"error_message,omitempty"`
	// Stack is the JavaScript stack of the error, with the file names of the run's modules.
	Stack string `json:"stack,omitempty"`
	// Logs is the console output, in order.
	Logs []LogEntry `json:"logs,omitempty"`
	// LogsTruncated reports that console output went past the log limit and the rest was
	// dropped.
	LogsTruncated bool `json:"logs_truncated,omitempty"`
	// Duration is the wall time of the run, from creating the interpreter to closing it.
	Duration time.Duration `json:"duration_ns"`
}

// LogEntry is one console call.
type LogEntry struct {
	// Level is the console method: log, info, warn, error or debug.
	Level string `json:"level"`
	Text  string `json:"text"`
}

// Err returns "ErrorName: ErrorMessage" for a failed run and "" for a successful one.
func (r *Result) Err() string {
	if r.Status == StatusSuccess {
		return ""
	}
	if r.ErrorName == "" {
		return r.ErrorMessage
	}
	return r.ErrorName + ": " + r.ErrorMessage
}
