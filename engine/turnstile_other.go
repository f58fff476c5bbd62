//go:build !unix

package engine

// Without flock there is no turnstile (turnstile_unix.go): a writer waits
// for readers as bbolt's lock lets it.
const turnstileFile = "anna.lock"

func takeTurnstile(dir string) (release func(), ok bool) { return func() {}, false }

func writerWaiting(dir string) bool { return false }
