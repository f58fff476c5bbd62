package filter_test

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/anna-search/anna/filter"
)

func TestReadNumber(t *testing.T) {
	for _, tc := range []struct {
		s  string
		x  float64
		ok bool
	}{
		{"1960", 1960, true}, {"-2.5", -2.5, true}, {"+3", 3, true}, {".5", 0.5, true}, {"5.", 5, true},
		{"1e3", 1000, true}, {"1E-2", 0.01, true}, {"007", 7, true}, {"-0", 0, true},
		{"", 0, false}, {" 1", 0, false}, {"1 ", 0, false}, {"0x10", 0, false}, {"Inf", 0, false},
		{"NaN", 0, false}, {"1_000", 0, false}, {"1e", 0, false}, {".", 0, false}, {"-", 0, false},
		{"1e400", 0, false}, {"2024-05-01", 0, false},
	} {
		x, ok := filter.ReadNumber(tc.s)
		if ok != tc.ok || (ok && x != tc.x) {
			t.Errorf("ReadNumber(%q) = %v, %v; want %v, %v", tc.s, x, ok, tc.x, tc.ok)
		}
	}
}

// TestEncodeNumberOrder: byte order of the keys is numeric order, and
// DecodeNumber inverts EncodeNumber.
func TestEncodeNumberOrder(t *testing.T) {
	xs := []float64{math.Inf(-1), -math.MaxFloat64, -1e300, -2.5, -1, -math.SmallestNonzeroFloat64, 0,
		math.SmallestNonzeroFloat64, 0.5, 1, 9, 10, 1e300, math.MaxFloat64, math.Inf(1)}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 1000 {
		xs = append(xs, (rng.Float64()-0.5)*math.Pow(10, float64(rng.IntN(40)-20)))
	}
	slices.Sort(xs)
	for i, x := range xs {
		k := filter.EncodeNumber(x)
		if y, ok := filter.DecodeNumber(k); !ok || y != x {
			t.Fatalf("DecodeNumber(EncodeNumber(%v)) = %v, %v", x, y, ok)
		}
		if i > 0 && xs[i-1] < x && !(filter.EncodeNumber(xs[i-1]) < k) {
			t.Fatalf("EncodeNumber(%v) >= EncodeNumber(%v)", xs[i-1], x)
		}
	}
	if filter.EncodeNumber(math.Copysign(0, -1)) != filter.EncodeNumber(0) {
		t.Fatal("-0 and 0 have different keys")
	}
}

func TestValueFromJSON(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want filter.Value
		ok   bool
	}{
		{`"a"`, filter.StringValue("a"), true},
		{`1960`, filter.NumberValue(1960), true},
		{`-0`, filter.NumberValue(0), true},
		{`1e400`, filter.StringValue("1e400"), true},
		{`true`, filter.StringValue("true"), true},
		{`null`, filter.Value{}, false},
		{`{"b": [1, 2]}`, filter.StringValue(`{"b":[1,2]}`), true},
		{`["a", 1, null, false, [2], {"c": 3}]`, filter.ListValue(filter.StringValue("a"), filter.NumberValue(1),
			filter.StringValue("false"), filter.StringValue("[2]"), filter.StringValue(`{"c":3}`)), true},
		{`[]`, filter.ListValue(), true},
		{" \"\xff\" ", filter.StringValue("\uFFFD"), true},
	} {
		v, ok, err := filter.ValueFromJSON([]byte(tc.in))
		if err != nil || ok != tc.ok || (ok && !v.Equal(tc.want)) {
			t.Errorf("ValueFromJSON(%s) = %s, %v, %v; want %s, %v", tc.in, v, ok, err, tc.want, tc.ok)
		}
	}
	if _, _, err := filter.ValueFromJSON([]byte(`[1,`)); err == nil {
		t.Error("ValueFromJSON of bad JSON: no error")
	}
}

func TestValueJSONRoundTrip(t *testing.T) {
	m := map[string]filter.Value{
		"s": filter.StringValue("x"), "n": filter.NumberValue(0.5), "big": filter.NumberValue(1e21),
		"l": filter.ListValue(filter.StringValue("a"), filter.NumberValue(-3), filter.ListValue(filter.StringValue("spliced"))),
		"e": filter.ListValue(),
	}
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"big":1e+21,"e":[],"l":["a",-3,"spliced"],"n":0.5,"s":"x"}`; string(data) != want {
		t.Fatalf("Marshal = %s, want %s", data, want)
	}
	var back map[string]filter.Value
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	for k, v := range m {
		if !back[k].Equal(v) {
			t.Errorf("%s: %s came back as %s", k, v, back[k])
		}
	}
	if _, err := json.Marshal(filter.NumberValue(math.NaN())); err == nil {
		t.Error("NaN marshalled")
	}
	if err := filter.ListValue(filter.NumberValue(math.Inf(1))).Validate(); err == nil {
		t.Error("Inf in a list is valid")
	}
	if s := filter.NumberValue(1960).String(); s != "1960" {
		t.Errorf("String = %q", s)
	}
}

// TestUnion: Union equals FastOr on mixes of nil, empty, small, large and
// far-reaching bitmaps, few and many, and leaves its inputs alone.
func TestUnion(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	for round := range 200 {
		bms := make([]*roaring.Bitmap, rng.IntN(60))
		for i := range bms {
			switch rng.IntN(6) {
			case 0:
				continue // nil
			case 1:
				bms[i] = roaring.New()
			case 2:
				bms[i] = roaring.New()
				bms[i].AddRange(uint64(rng.IntN(100000)), uint64(100000+rng.IntN(100000)))
			case 3:
				bms[i] = roaring.BitmapOf(uint32(rng.Uint32()))
			default:
				bms[i] = roaring.New()
				for range 1 + rng.IntN(70) {
					bms[i].Add(uint32(rng.IntN(1 << 17)))
				}
			}
		}
		var copies []*roaring.Bitmap
		var nonNil []*roaring.Bitmap
		for _, bm := range bms {
			if bm != nil {
				copies = append(copies, bm.Clone())
				nonNil = append(nonNil, bm)
			}
		}
		got, want := filter.Union(bms...), roaring.FastOr(nonNil...)
		if !got.Equals(want) {
			t.Fatalf("round %d: Union of %d bitmaps: %d documents, FastOr %d", round, len(bms), got.GetCardinality(), want.GetCardinality())
		}
		for i, bm := range nonNil {
			if !bm.Equals(copies[i]) {
				t.Fatalf("round %d: Union modified an input", round)
			}
		}
	}
}
