package engine

import "time"

// ShortenShareWaits makes a read-only open give up sooner on a writer that
// does not answer; restore puts the defaults back. Call it while no Open
// runs.
func ShortenShareWaits(reader, hello time.Duration) (restore func()) {
	r, h := readerWait, helloTimeout
	readerWait, helloTimeout = reader, hello
	return func() { readerWait, helloTimeout = r, h }
}
