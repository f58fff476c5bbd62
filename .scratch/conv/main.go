package main

import (
	"context"
	"fmt"
	"os"

	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/model/catalog"
)

// conv NAME QUANT DESTMODELS: imports a catalogue entry from its source dir or download.
func main() {
	e, err := catalog.Lookup(os.Args[1])
	if err != nil {
		panic(err)
	}
	o := catalog.Options{ModelsDir: os.Args[3], DownloadsDir: home.DownloadsDir(), Quantize: os.Args[2]}
	src := catalog.SourceDir(home.SourceDir(), e)
	if _, err := os.Stat(src); err == nil {
		m, err := catalog.Import(context.Background(), e, src, o)
		if err != nil {
			panic(err)
		}
		fmt.Println(m.Name, m.Fingerprint[:12])
		return
	}
	m, err := catalog.Install(context.Background(), e, o)
	if err != nil {
		panic(err)
	}
	fmt.Println(m.Name, m.Fingerprint[:12])
}
