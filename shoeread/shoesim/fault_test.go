package shoesim

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseFault(t *testing.T) {
	tests := []struct {
		spec string
		want Fault
		str  string // String(), when it differs from spec
	}{
		{"noise@3", Fault{Kind: FaultNoise, Coup: 3, N: DefaultNoiseBytes}, "noise@3:16"},
		{"noise@3.2:40", Fault{Kind: FaultNoise, Coup: 3, Card: 2, N: 40}, ""},
		{"badsum@2.3", Fault{Kind: FaultBadSum, Coup: 2, Card: 3}, ""},
		{"badsum@2", Fault{Kind: FaultBadSum, Coup: 2}, ""},
		{"drop@4.1:2", Fault{Kind: FaultDrop, Coup: 4, Card: 1, N: 2}, ""},
		{"drop@4.1", Fault{Kind: FaultDrop, Coup: 4, Card: 1, N: 1}, "drop@4.1:1"},
		{"unreadable@5.2", Fault{Kind: FaultUnreadable, Coup: 5, Card: 2}, ""},
		{"extra@6", Fault{Kind: FaultExtra, Coup: 6}, ""},
		{"extra@6.0", Fault{Kind: FaultExtra, Coup: 6}, "extra@6"},
		{"early@7", Fault{Kind: FaultEarly, Coup: 7}, ""},
		{"impossible@8.1", Fault{Kind: FaultImpossible, Coup: 8, Card: 1}, ""},
		{"silence@9.2:3s", Fault{Kind: FaultSilence, Coup: 9, Card: 2, For: 3 * time.Second}, ""},
		{"silence@9", Fault{Kind: FaultSilence, Coup: 9, For: DefaultFaultFor}, "silence@9:2s"},
		{"unplug@2/10.1:1m30s", Fault{Kind: FaultUnplug, Shoe: 2, Coup: 10, Card: 1, For: 90 * time.Second}, ""},
		{"unplug@1/10:500ms", Fault{Kind: FaultUnplug, Shoe: 1, Coup: 10, For: 500 * time.Millisecond}, "unplug@10:500ms"},
		{"shortburn@2", Fault{Kind: FaultShortBurn, Shoe: 2}, ""},
		{"shortburn@1", Fault{Kind: FaultShortBurn, Shoe: 1}, ""},
		{"status@4.1:SENSOR", Fault{Kind: FaultStatus, Coup: 4, Card: 1, Status: "SENSOR", Text: DefaultStatusText}, "status@4.1:SENSOR,simulated"},
		{"status@2/5:LID_OPEN,lid opened, by dealer: 2", Fault{Kind: FaultStatus, Shoe: 2, Coup: 5, Status: "LID_OPEN", Text: "lid opened, by dealer: 2"}, ""},
		{"status@3:jam-1,x", Fault{Kind: FaultStatus, Coup: 3, Status: "jam-1", Text: "x"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			got, err := ParseFault(tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			if tt.want.Shoe == 0 {
				tt.want.Shoe = 1
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			str := tt.str
			if str == "" {
				str = tt.spec
			}
			if got.String() != str {
				t.Fatalf("String() = %q, want %q", got.String(), str)
			}
		})
	}
}

func TestParseFaultRefuses(t *testing.T) {
	tests := []struct{ spec, says string }{
		{"", "want KIND@"},
		{"noise", "want KIND@"},
		{"smoke@3", "unknown kind"},
		{"NOISE@3", "unknown kind"},
		{"noise@", "coup"},
		{"noise@0", "coup"},
		{"noise@-1", "coup"},
		{"noise@x", "coup"},
		{"noise@3.7", "card"},
		{"noise@3.-1", "card"},
		{"noise@3.12", "card"},
		{"noise@0/3", "shoe"},
		{"noise@3:0", "count"},
		{"noise@3:5000", "at most"},
		{"drop@3:x", "count"},
		{"silence@3:0s", "duration"},
		{"silence@3:-1s", "duration"},
		{"unplug@3:soon", "duration"},
		{"badsum@3:2", "takes no argument"},
		{"unreadable@3", "needs a card"},
		{"impossible@3.0", "needs a card"},
		{"extra@3.2", "whole coup"},
		{"early@3.1", "whole coup"},
		{"noise@99999999999", "coup"},
		{"shortburn@", "names a shoe only"},
		{"shortburn@0", "names a shoe only"},
		{"shortburn@1/2", "names a shoe only"},
		{"shortburn@2.1", "names a shoe only"},
		{"shortburn@2:1", "names a shoe only"},
		{"status@3", "needs a code"},
		{"status@3:", "needs a code"},
		{"status@3:,text", "needs a code"},
		{"status@3:SENSOR,", "empty text"},
		{"status@3:LID OPEN", "want A-Z a-z 0-9 _ -"},
		{"status@3:LID:OPEN", "want A-Z a-z 0-9 _ -"},
		{"status@3:ABCDEFGHIJKLMNOPQ", "at most 16"},
		{"status@3:X,a$b", "printable ASCII other than"},
		{"status@3:X,a*b", "printable ASCII other than"},
		{"status@3:X,<a>", "printable ASCII other than"},
		{"status@3:X,tab\there", "printable ASCII other than"},
		{"status@3:X, lead", "either end"},
		{"status@3:X,trail ", "either end"},
		{"status@3:X," + strings.Repeat("t", MaxStatusText+1), "at most 40"},
		{"noise@3:SENSOR,x", "count"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			_, err := ParseFault(tt.spec)
			if !errors.Is(err, ErrFault) || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("ParseFault(%q) = %v, want ErrFault saying %q", tt.spec, err, tt.says)
			}
		})
	}
}

// Every kind is documented in the help text the CLI shows.
func TestFaultSpecHelpNamesEveryKind(t *testing.T) {
	for _, k := range FaultKinds {
		if !strings.Contains(FaultSpecHelp, "\n    "+string(k)) {
			t.Errorf("FaultSpecHelp does not document %s", k)
		}
	}
	// And its examples parse.
	_, ex, _ := strings.Cut(FaultSpecHelp, "e.g.")
	for _, spec := range strings.Fields(ex) {
		if _, err := ParseFault(spec); err != nil {
			t.Errorf("help example %q: %v", spec, err)
		}
	}
}

// ParseFault reads the command line, which is outside input: it never
// panics, and whatever it accepts, String writes back in a form it reads
// to the same fault.
func FuzzParseFault(f *testing.F) {
	for _, s := range []string{"noise@3", "drop@2/4.1:2", "unplug@10:1m", "silence@1.1:1ns", "x@1", "@", "noise@3.", "noise@/3", "noise@1/2/3",
		"shortburn@2", "status@2/4.1:SENSOR,reader 2 dirty", "status@3:X,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		got, err := ParseFault(spec)
		if err != nil {
			if !errors.Is(err, ErrFault) {
				t.Fatalf("ParseFault(%q): error %v does not wrap ErrFault", spec, err)
			}
			return
		}
		again, err := ParseFault(got.String())
		if err != nil {
			t.Fatalf("ParseFault(%q).String() = %q does not parse: %v", spec, got.String(), err)
		}
		if again != got {
			t.Fatalf("%q -> %+v -> %q -> %+v", spec, got, got.String(), again)
		}
	})
}
