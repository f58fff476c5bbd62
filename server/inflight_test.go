package server

import (
	"context"
	"testing"
	"time"
)

// TestBodyBudget: the bodies in flight share one budget: a request that
// does not fit waits, in order, until others give theirs back or its
// context ends; small ones pass beside a large one that fits.
func TestBodyBudget(t *testing.T) {
	b := &bodyBudget{size: 100}
	ctx := context.Background()
	if err := b.acquire(ctx, 80); err != nil {
		t.Fatal(err)
	}
	if err := b.acquire(ctx, 15); err != nil { // fits beside
		t.Fatal(err)
	}
	got := make(chan int, 3)
	go func() { b.acquire(ctx, 60); got <- 60 }()
	time.Sleep(20 * time.Millisecond)
	go func() { b.acquire(ctx, 5); got <- 5 }() // fits, but waits behind the 60
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := b.acquire(short, 50); err == nil {
		t.Fatal("a request that does not fit did not wait")
	}
	select {
	case n := <-got:
		t.Fatalf("%d admitted while 95 of 100 are taken and a 60 waits first", n)
	case <-time.After(50 * time.Millisecond):
	}
	b.release(80)
	for range 2 {
		select {
		case <-got:
		case <-time.After(5 * time.Second):
			t.Fatal("the waiters were not admitted once 80 were given back")
		}
	}
	b.release(60)
	b.release(5)
	b.release(15)
	// More than the whole budget takes all of it, once it is free.
	if err := b.acquire(ctx, 1000); err != nil || b.used != 100 {
		t.Fatalf("acquire(1000) of a free budget of 100: %v, %d used", err, b.used)
	}
	b.release(1000)
	if b.used != 0 || b.waiters.Len() != 0 {
		t.Fatalf("%d used, %d waiting at the end", b.used, b.waiters.Len())
	}
}
