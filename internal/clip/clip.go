// Package clip bounds what a message repeats of its input. Errors name the
// ID, key or text that is wrong, and an input can be megabytes long (a
// 1 MB document ID in a URL, a 40 KB metadata key): an error that quoted
// it whole would cost as much to build, log and send back as the input
// itself. Quote shows at most Max bytes of a string, cut at a rune
// boundary, and says how long the whole is.
//
// Invariants: Quote and String never return more than about Max+40 bytes
// whatever their input, and return their input unchanged (quoted, for
// Quote) when it is at most Max bytes long.
package clip

import (
	"strconv"
	"unicode/utf8"
)

// Max is how many bytes of an input Quote and String show.
const Max = 64

// Quote is strconv.Quote(s) for a short s; a longer one is quoted by its
// first Max bytes (cut at a rune boundary), followed by `…` and its length
// in bytes: "aaaa"… (40960 bytes).
func Quote(s string) string {
	if len(s) <= Max {
		return strconv.Quote(s)
	}
	return strconv.Quote(prefix(s, Max)) + "… (" + strconv.Itoa(len(s)) + " bytes)"
}

// String is s when it is at most Max bytes long, else its first Max bytes
// (cut at a rune boundary), `…` and its length in bytes. Unlike Quote it
// adds no quotes, for text a message already sets apart.
func String(s string) string {
	if len(s) <= Max {
		return s
	}
	return prefix(s, Max) + "… (" + strconv.Itoa(len(s)) + " bytes)"
}

// Bytes cuts a message to at most n bytes (at a rune boundary), ending it
// with `…` when it was longer: the last guard of an answer that may hold
// input (an error body).
func Bytes(msg string, n int) string {
	if len(msg) <= n {
		return msg
	}
	return prefix(msg, max(0, n-len("…"))) + "…"
}

// prefix is s cut to at most n bytes, at a rune boundary.
func prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
