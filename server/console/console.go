// Package console is the web console quiver serve shows at /: threads, live runs, approvals,
// tools, variables and keys, for people who would rather look than read JSON.
//
// It is a client of the /v1 API and nothing else: every read and change goes through the same
// authentication, workspace checks and dispatcher as any other client's, with the API key the
// person signs in with, or the access token of their sign-in with the identity provider
// (sso.js), kept in the browser tab's session storage and sent in the Authorization header
// (never a cookie, so no request can be forged from another site, and never in a URL).
//
// Why plain JavaScript modules, embedded: the console must work with `go run ./cmd/quiver
// serve` and nothing else, so nothing is built at install or run time; the browser loads the
// modules as they are written. They build the page with DOM calls and put every value a
// model, a tool or a person wrote in as text (textContent), never as HTML, and the
// Content-Security-Policy below lets the page run only these files: no inline script, no
// other origin.
package console

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed assets
var assets embed.FS

// Policy is the console's Content-Security-Policy: its own scripts, styles and API only;
// images also from blob: URLs (attachments are fetched with the key, then shown).
const Policy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; connect-src 'self'; " +
	"font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Options change what the console's page may do.
type Options struct {
	// ConnectOrigins, when set, returns origins (scheme://host[:port]) the page may fetch
	// from besides its own: the identity provider's token endpoint, for signing in with it.
	ConnectOrigins func(*http.Request) []string
}

// Handler serves the console: its page at / and its files under /console/.
func Handler() http.Handler { return HandlerWith(Options{}) }

// HandlerWith is Handler with options.
func HandlerWith(o Options) http.Handler {
	files, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is part of the binary
	}
	static := http.StripPrefix("/console/", http.FileServerFS(files))
	page, err := fs.ReadFile(files, "index.html")
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		Secure(w)
		if o.ConnectOrigins != nil {
			if extra := o.ConnectOrigins(r); len(extra) > 0 {
				w.Header().Set("Content-Security-Policy", strings.Replace(Policy, "connect-src 'self'", "connect-src 'self' "+strings.Join(extra, " "), 1))
			}
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		w.Write(page)
	})
	mux.HandleFunc("GET /console/", func(w http.ResponseWriter, r *http.Request) {
		Secure(w)
		w.Header().Set("Cache-Control", "no-cache")
		static.ServeHTTP(w, r)
	})
	return mux
}

// Secure sets the headers every console response carries, and every page served beside it
// under the same policy (the API reference).
func Secure(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", Policy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
}
