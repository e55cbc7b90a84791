package threadprio

import (
	"runtime"
	"testing"
)

// TestSameNice: a goroutine at nice 19 gets its thread's priority, the
// goroutines it starts take the same, and the rest of the process keeps
// its own.
func TestSameNice(t *testing.T) {
	before := func() int {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		return Nice()
	}()
	got := make(chan [2]int)
	go func() {
		Lowest()
		caller := Nice()
		inner := make(chan int)
		go func() {
			Same(caller)
			inner <- Nice()
		}()
		got <- [2]int{caller, <-inner}
	}()
	n := <-got
	if runtime.GOOS == "linux" && n[0] != 19 {
		t.Fatalf("the thread has nice %d after Lowest", n[0])
	}
	if n[1] != n[0] {
		t.Errorf("a goroutine it started runs at nice %d, its caller at %d", n[1], n[0])
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if now := Nice(); now != before {
		t.Errorf("another thread has nice %d, had %d: Lowest changed more than its own", now, before)
	}
}
