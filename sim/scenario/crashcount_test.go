package scenario

import "testing"

// TestCrashCountStep: afterWrites crashes at that step, once; a rate
// crashes on its draw, and a zero rate draws nothing.
func TestCrashCountStep(t *testing.T) {
	var c CrashCount
	draws := 0
	draw := func() float64 { draws++; return 0 }
	for i, want := range []bool{false, false, true, false, false} {
		if got := c.Step(3, 0, draw); got != want {
			t.Errorf("afterWrites 3, step %d: %v, want %v", i+1, got, want)
		}
	}
	if c.Steps != 3 || !c.Done || draws != 0 {
		t.Errorf("after the crash: %+v, %d draws; want 3 steps, done, no draw", c, draws)
	}
	var r CrashCount
	if r.Step(0, 0, draw) || draws != 0 {
		t.Errorf("rate 0 crashed or drew (%d draws)", draws)
	}
	if !r.Step(0, 0.5, draw) || r.Step(0, 0.5, func() float64 { return 0.7 }) {
		t.Error("rate 0.5: a draw of 0 must crash and one of 0.7 not")
	}
}
