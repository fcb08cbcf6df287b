package quiver

import (
	"context"
)

// LogLevel is the severity of a message a tool logs with [Log]. The levels are those of
// syslog (RFC 5424), which MCP's logging notifications use too.
type LogLevel string

// Log levels, least severe first.
const (
	LogDebug     LogLevel = "debug"
	LogInfo      LogLevel = "info"
	LogNotice    LogLevel = "notice"
	LogWarning   LogLevel = "warning"
	LogError     LogLevel = "error"
	LogCritical  LogLevel = "critical"
	LogAlert     LogLevel = "alert"
	LogEmergency LogLevel = "emergency"
)

// Reporter receives the progress and log messages of running tools: whoever runs calls
// installs one in the context with [WithReporter] (the MCP server turns them into progress and
// logging notifications for its client). Its methods must be safe for concurrent use and should
// not block for long: a tool waits for them.
type Reporter interface {
	// Progress reports that done units of work out of total are complete (total is 0 when
	// unknown), with an optional message.
	Progress(ctx context.Context, done, total float64, message string)
	// Log reports a message the tool logged.
	Log(ctx context.Context, level LogLevel, message string)
}

type reporterKey struct{}

// WithReporter returns a context whose tool calls report progress and logs to r. Calls made
// from inside a tool inherit it.
func WithReporter(ctx context.Context, r Reporter) context.Context {
	return context.WithValue(ctx, reporterKey{}, r)
}

// ReportProgress tells whoever made the running call how far it has come: done units of work
// out of total (0 when the total is unknown), with an optional message. It does nothing when
// no [Reporter] listens, so a tool can call it unconditionally. Secret values of the call's
// variables are masked in the message, as in results.
func ReportProgress(ctx context.Context, done, total float64, message string) {
	r, _ := ctx.Value(reporterKey{}).(Reporter)
	if r == nil {
		return
	}
	r.Progress(ctx, done, total, maskForReport(ctx, message))
}

// Log sends a message about the running call to whoever made it (an MCP client receives it as
// a logging notification). It does nothing when no [Reporter] listens. Secret values of the
// call's variables are masked in the message.
func Log(ctx context.Context, level LogLevel, message string) {
	r, _ := ctx.Value(reporterKey{}).(Reporter)
	if r == nil {
		return
	}
	r.Log(ctx, level, maskForReport(ctx, message))
}

func maskForReport(ctx context.Context, s string) string {
	c := CallFrom(ctx)
	if c == nil || len(c.secrets) == 0 || s == "" {
		return s
	}
	return secretReplacer(c.secrets).Replace(s)
}
