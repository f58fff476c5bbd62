package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/anna-search/anna/encoder"
)

func cpu() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func read(path, field string, n int) []string {
	f, _ := os.Open(path)
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	var texts []string
	for sc.Scan() && len(texts) < n {
		var r map[string]any
		json.Unmarshal(sc.Bytes(), &r)
		t, _ := r[field].(string)
		if ti, ok := r["title"].(string); ok && field == "text" {
			t = ti + " " + t
		}
		texts = append(texts, t)
	}
	return texts
}

func main() {
	ctx := context.Background()
	dir := os.Args[1]
	n, _ := strconv.Atoi(os.Args[3])
	var texts []string
	switch os.Args[2] {
	case "q":
		texts = read("/work/shared/datasets/squad2-dev-half/queries.jsonl", "text", n)
	case "d":
		texts = read("/work/shared/datasets/scifact/corpus.jsonl", "text", n)
	case "p":
		texts = read("/work/shared/datasets/squad2-dev-half/corpus.jsonl", "text", n)
	}
	enc, err := encoder.Load(ctx, dir, encoder.Options{})
	if err != nil {
		panic(err)
	}
	enc.EmbedDocuments(ctx, texts[:4])
	for r := 0; r < 2; r++ {
		c0, t0 := cpu(), time.Now()
		if _, err := enc.EmbedDocuments(ctx, texts); err != nil {
			panic(err)
		}
		fmt.Printf("%s %s %d: %.2f cpu-s %.2f wall-s\n", dir, os.Args[2], len(texts), (cpu() - c0).Seconds(), time.Since(t0).Seconds())
	}
}
