package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"reflect"
	"runtime"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/quiverhq/quiver"
)

// logLevelEnv names the variable that sets how much quiver serve and quiver mcp stdio log:
// debug, info (the default), warn or error.
const logLevelEnv = "QUIVER_LOG_LEVEL"

// logLevel reads QUIVER_LOG_LEVEL.
func logLevel() (slog.Level, error) {
	v := os.Getenv(logLevelEnv)
	if v == "" {
		return slog.LevelInfo, nil
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(v)); err != nil {
		return 0, fmt.Errorf("%s=%q: want debug, info, warn or error", logLevelEnv, v)
	}
	return l, nil
}

// serveBanner is what quiver serve prints once it listens: where its doors are, where its data
// lives and, on the first start, the admin key, in one write, so that nothing logged meanwhile
// splits it and a reader of the output finds all of it at once.
func serveBanner(addr net.Addr, db *opened, first *firstKey, insecure bool) string {
	base, note := baseURL(addr)
	var b strings.Builder
	fmt.Fprintf(&b, "quiver: serving MCP at %s/mcp%s; Ctrl-C stops\n", base, note)
	fmt.Fprintf(&b, "  console  %s/\n", base)
	fmt.Fprintf(&b, "  API      %s/v1 (its OpenAPI document: %s/v1/openapi.json)\n", base, base)
	fmt.Fprintf(&b, "  health   %s/healthz\n", base)
	fmt.Fprintf(&b, "  data     %s\n", describeData(db))
	switch {
	case insecure:
		b.WriteString("quiver: WARNING: --insecure-local: no API key is asked for; anything on this machine can call every tool, run_code included\n")
	case first != nil:
		fmt.Fprintf(&b, "\nquiver: made the first API key, an admin's (%s); it is shown this once, keep it:\n\n    %s\n\n", first.record.ID, first.secret)
		fmt.Fprintf(&b, "  MCP and API clients send it as \"Authorization: Bearer qvk_...\"; the console signs in with it.\n")
		fmt.Fprintf(&b, "  quiver keys create makes more; quiver keys revoke %s ends this one.\n", first.record.ID)
	default:
		b.WriteString("  keys     the API keys made before (quiver keys list); quiver keys create --name NAME makes another\n")
	}
	return b.String()
}

// baseURL is the URL clients on this machine reach the server at. A server listening on every
// interface (0.0.0.0, ::) is shown at localhost, which a browser can open, with a note saying
// where it listens.
func baseURL(addr net.Addr) (base, note string) {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String(), ""
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return "http://" + net.JoinHostPort("localhost", port), " (listening on every interface, " + addr.String() + ")"
	}
	return "http://" + net.JoinHostPort(host, port), ""
}

// describeData says which database the server keeps its records in: a SQLite file, or a
// PostgreSQL database by host, port, name and user, never its password.
func describeData(db *opened) string {
	if db.SQLitePath != "" {
		return db.SQLitePath + " (SQLite)"
	}
	return describePostgres(db.DSN)
}

func describePostgres(dsn string) string {
	c, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "PostgreSQL" // the store opened it, so this does not happen; the DSN may hold a password
	}
	where := fmt.Sprintf("%s:%d", c.Host, c.Port)
	if strings.HasPrefix(c.Host, "/") {
		where = "the socket in " + c.Host
	}
	return fmt.Sprintf("PostgreSQL database %s on %s, as user %s", c.Database, where, c.User)
}

// listenFailed explains a failure to listen, and what became of the API keys: none is made by
// a start that cannot listen, and those made before are untouched.
func listenFailed(ctx context.Context, addr string, err error, db *opened, insecure bool) error {
	// net's error repeats the address: keep what the system said.
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		err = op.Err
	}
	hint := ""
	if errors.Is(err, syscall.EADDRINUSE) {
		hint = " (is another quiver serve running? stop it, or choose another address with --addr or $" + addrEnv + ")"
	}
	keys := ""
	if !insecure {
		switch has, kerr := hasKeys(ctx, db); {
		case kerr != nil:
		case has:
			keys = "; the API keys made before stay valid"
		default:
			keys = "; no API key was made: the first start that listens makes one and shows it"
		}
	}
	return fmt.Errorf("listening on %s: %w%s%s", addr, err, hint, keys)
}

// quietLibraries lowers the informational records of code outside Quiver to debug: River's
// migrations, its client starting and stopping and its producers' counts buried the lines a
// person starting the server needs. Their warnings and errors pass unchanged, and
// QUIVER_LOG_LEVEL=debug shows the rest.
type quietLibraries struct{ slog.Handler }

func (h quietLibraries) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelInfo && r.Level < slog.LevelWarn && (!loggedByQuiver(r.PC) || r.Message == servingMessage) {
		r.Level = slog.LevelDebug
		if !h.Handler.Enabled(ctx, r.Level) {
			return nil
		}
	}
	return h.Handler.Handle(ctx, r)
}

// servingMessage is the server's record of where it listens, which quiver serve's banner says
// in full just before it.
const servingMessage = "quiver: serving"

func (h quietLibraries) WithAttrs(attrs []slog.Attr) slog.Handler {
	return quietLibraries{h.Handler.WithAttrs(attrs)}
}

func (h quietLibraries) WithGroup(name string) slog.Handler {
	return quietLibraries{h.Handler.WithGroup(name)}
}

// quiverModule is the module path of Quiver's own packages.
var quiverModule = reflect.TypeFor[quiver.Registry]().PkgPath()

// loggedByQuiver reports whether the function at pc, which logged a record, is Quiver's: a
// package of its module, or this command. A record without a pc counts as Quiver's.
func loggedByQuiver(pc uintptr) bool {
	if pc == 0 {
		return true
	}
	f, _ := runtime.CallersFrames([]uintptr{pc}).Next()
	fn := f.Function
	return fn == "" || strings.HasPrefix(fn, "main.") || strings.HasPrefix(fn, quiverModule+".") || strings.HasPrefix(fn, quiverModule+"/")
}
