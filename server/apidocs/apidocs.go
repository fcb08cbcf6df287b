// Package apidocs is the browsable reference of the /v1 API that quiver serve shows at
// /v1/docs: a page that reads the server's own OpenAPI document (/v1/openapi.json) and lays it
// out for people, operation by operation, grouped by resource, with their parameters and the
// schemas of their bodies and answers.
//
// Why a page of its own rather than a reference renderer from a CDN: the server must work
// offline and behind the console's Content-Security-Policy, which lets a page run only the
// server's own files; so the page, its script and its style are embedded here, nothing is
// fetched from another origin, and every text the document holds is put in as text, never as
// HTML.
package apidocs

import (
	"embed"
	"io/fs"
	"net/http"

	"github.com/quiverhq/quiver/server/console"
)

//go:embed assets
var assets embed.FS

// Path is where the reference is served: its page, and its files under Path + "/".
const Path = "/v1/docs"

// Handler serves the reference: its page at Path and its script and style under Path/.
func Handler() http.Handler {
	files, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is part of the binary
	}
	page, err := fs.ReadFile(files, "index.html")
	if err != nil {
		panic(err)
	}
	static := http.StripPrefix(Path+"/", http.FileServerFS(files))
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+Path, func(w http.ResponseWriter, r *http.Request) {
		// The console's policy holds for the reference too, so that it can never need what
		// the console's policy refuses.
		console.Secure(w)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		w.Write(page)
	})
	mux.HandleFunc("GET "+Path+"/", func(w http.ResponseWriter, r *http.Request) {
		console.Secure(w)
		w.Header().Set("Cache-Control", "no-cache")
		static.ServeHTTP(w, r)
	})
	return mux
}
