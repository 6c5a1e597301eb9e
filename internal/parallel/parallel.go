// Package parallel runs independent work items on a fixed number of
// goroutines: the explorer's and the what-if sweep's twin runs, one engine
// per item. It is an edge (DESIGN §1): the items share nothing, and each
// writes only its own result slot, so the outcome does not depend on the
// order they finish in.
package parallel

import "sync"

// For calls f(0), ..., f(n-1) on min(jobs, n) goroutines (at least one)
// and returns when every call has.
func For(jobs, n int, f func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(1, min(jobs, n)) {
		wg.Add(1)
		go func() { // edge: worker of the outer loop
			defer wg.Done()
			for i := range next {
				f(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}
