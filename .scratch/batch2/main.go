package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"

	"github.com/anna-search/anna/encoder"
)

func main() {
	ctx := context.Background()
	dir, backend := os.Args[1], os.Args[2]
	n, _ := strconv.Atoi(os.Args[3])
	f, _ := os.Open("/work/shared/datasets/scifact/corpus.jsonl")
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	var texts []string
	for sc.Scan() && len(texts) < n {
		var r struct{ Title, Text string }
		json.Unmarshal(sc.Bytes(), &r)
		t := r.Title + " " + r.Text
		// vary lengths: cut some
		switch len(texts) % 4 {
		case 1:
			t = t[:min(len(t), 60)]
		case 2:
			t = t[:min(len(t), 300)]
		}
		texts = append(texts, t)
	}
	enc, err := encoder.Load(ctx, dir, encoder.Options{Backend: backend})
	if err != nil {
		panic(err)
	}
	all, err := enc.EmbedDocuments(ctx, texts)
	if err != nil {
		panic(err)
	}
	worst, bad := 0.0, 0
	for i, t := range texts {
		a, _ := enc.EmbedDocuments(ctx, []string{t})
		d := 0.0
		for j := range a[0] {
			d = math.Max(d, math.Abs(float64(a[0][j]-all[i][j])))
		}
		worst = math.Max(worst, d)
		if d > 1e-6 {
			bad++
		}
	}
	fmt.Printf("%s %s: %d texts, worst %.3g, %d over 1e-6\n", dir, backend, len(texts), worst, bad)
}
