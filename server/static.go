package server

import (
	_ "embed"
	"net/http"
)

// The page and the API description are files in the binary: no CDN, no
// build step.
var (
	//go:embed static/index.html
	pageHTML []byte
	//go:embed static/openapi.json
	openAPIJSON []byte
)

func servePage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'")
	w.Write(pageHTML)
}

func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openAPIJSON)
}
