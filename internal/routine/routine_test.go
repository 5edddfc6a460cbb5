package routine_test

import (
	"context"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/internal/routine"
)

func TestGroup_WaitAndClose(t *testing.T) {
	t.Parallel()
	var g routine.Group
	release := make(chan struct{})
	if !g.Go(func() { <-release }) {
		t.Fatal("Go refused before Close")
	}
	g.Close()
	if g.Go(func() {}) {
		t.Fatal("Go accepted after Close")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.Wait(ctx); err != context.Canceled {
		t.Fatalf("Wait with a running goroutine and a cancelled ctx = %v, want context.Canceled", err)
	}
	close(release)
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := g.Wait(ctx); err != nil {
		t.Fatalf("Wait after release = %v", err)
	}
}
