package ingest

// CountReads has fn hear of each file a folder's sync reads, until undo.
func CountReads(fn func(rel string)) (undo func()) {
	testRead = fn
	return func() { testRead = nil }
}
