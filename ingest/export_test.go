package ingest

// CountReads has fn hear of each file a folder's sync reads, until undo.
func CountReads(fn func(rel string)) (undo func()) {
	testRead = fn
	return func() { testRead = nil }
}

// ReadAhead is how many files a folder's sync reads ahead of its commits.
func ReadAhead() int { return readAhead }
