package main

import (
	"fmt"
	"os"
	"sort"

	"github.com/anna-search/anna/model/onnxfile"
)

func main() {
	m, err := onnxfile.ReadFile(os.Args[1])
	if err != nil {
		panic(err)
	}
	ops := map[string]int{}
	for _, n := range m.Nodes {
		ops[n.Domain+":"+n.OpType]++
	}
	fmt.Println(ops)
	lim := 400
	if len(os.Args) > 2 {
		lim = 100000
	}
	for i, n := range m.Nodes {
		if i > lim {
			break
		}
		fmt.Printf("%s %s %v -> %v %v\n", n.OpType, n.Name, n.Inputs, n.Outputs, n.Attrs)
	}
	var names []string
	for k := range m.Initializers {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		t := m.Initializers[k]
		ex := ""
		if len(t.Int64) > 0 && len(t.Int64) < 4 {
			ex = fmt.Sprint(t.Int64)
		}
		if len(t.Float) > 0 && len(t.Float) < 4 {
			ex = fmt.Sprint(t.Float)
		}
		fmt.Println("INIT", k, t.DataType, t.Shape, ex)
	}
}
