package device

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.bug.st/serial"
)

func TestConfigValidate(t *testing.T) {
	usb := &USBID{VID: "0403", PID: "6001"}
	tests := []struct {
		name string
		cfg  Config
		errs []string // substrings, one per expected problem; none means valid
	}{
		{"path defaults", Config{Path: "/dev/ttyUSB0"}, nil},
		{"by-id link", Config{Path: "/dev/serial/by-id/usb-FTDI_FT232R_A10K2-if00-port0"}, nil},
		{"pty", Config{Path: "/dev/pts/3", Baud: 115200, DataBits: 7, Parity: "even", StopBits: "2"}, nil},
		{"usb", Config{USB: usb}, nil},
		{"usb 0x and lower case", Config{USB: &USBID{VID: "0x10c4", PID: "EA60", Serial: "0001"}}, nil},
		{"parity initials", Config{Path: "/dev/ttyS0", Parity: "O"}, nil},
		{"parity mark", Config{Path: "/dev/ttyS0", Parity: "Mark"}, nil},
		{"parity space", Config{Path: "/dev/ttyS0", Parity: "space"}, nil},
		{"data bits 5", Config{Path: "/dev/ttyS0", DataBits: 5}, nil},
		{"odd baud", Config{Path: "/dev/ttyS0", Baud: 250000}, nil},
		{"silence off", Config{Path: "/dev/ttyS0", SilentAfter: Off}, nil},
		{"equal backoff bounds", Config{Path: "/dev/ttyS0", BackoffMin: Duration(time.Second), BackoffMax: Duration(time.Second)}, nil},

		{"no port", Config{}, []string{"no port"}},
		{"both", Config{Path: "/dev/ttyUSB0", USB: usb}, []string{"both path"}},
		{"relative", Config{Path: "ttyUSB0"}, []string{"absolute path"}},
		{"nul", Config{Path: "/dev/tty\x00USB0"}, []string{"NUL byte"}},
		{"short vid", Config{USB: &USBID{VID: "403", PID: "6001"}}, []string{"usb vid \"403\""}},
		{"bad pid", Config{USB: &USBID{VID: "0403", PID: "60G1"}}, []string{"usb pid \"60G1\""}},
		{"empty ids", Config{USB: &USBID{}}, []string{"usb vid", "usb pid"}},
		{"negative baud", Config{Path: "/dev/ttyS0", Baud: -9600}, []string{"baud -9600"}},
		{"huge baud", Config{Path: "/dev/ttyS0", Baud: 10_000_000}, []string{"baud 10000000"}},
		{"data bits 9", Config{Path: "/dev/ttyS0", DataBits: 9}, []string{"data_bits 9"}},
		{"data bits 4", Config{Path: "/dev/ttyS0", DataBits: 4}, []string{"data_bits 4"}},
		{"parity", Config{Path: "/dev/ttyS0", Parity: "evens"}, []string{"parity \"evens\""}},
		{"stop bits 3", Config{Path: "/dev/ttyS0", StopBits: "3"}, []string{"stop_bits \"3\""}},
		{"stop bits 1.5 on unix", Config{Path: "/dev/ttyS0", StopBits: StopBitsOnePointFive}, []string{"stop_bits 1.5: supported only on Windows"}},
		{"negative silence", Config{Path: "/dev/ttyS0", SilentAfter: Duration(-time.Second)}, []string{"silent_after -1s"}},
		{"backoff off", Config{Path: "/dev/ttyS0", BackoffMin: Off}, []string{"backoff_min off"}},
		{"backoff inverted", Config{Path: "/dev/ttyS0", BackoffMin: Duration(time.Second), BackoffMax: Duration(time.Millisecond)}, []string{"backoff_max 1ms is below backoff_min 1s"}},
		{"everything wrong", Config{Baud: -1, DataBits: 1, Parity: "x", StopBits: "0"},
			[]string{"no port", "baud -1", "data_bits 1", "parity \"x\"", "stop_bits \"0\""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if len(tt.errs) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate accepted %+v", tt.cfg)
			}
			if !errors.Is(err, ErrConfig) {
				t.Errorf("error %v does not wrap ErrConfig", err)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tt.errs) {
				t.Errorf("%d problems reported, want %d:\n%v", len(lines), len(tt.errs), err)
			}
			for _, want := range tt.errs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
			if _, nerr := NewLink(tt.cfg, Options{OnData: func([]byte) {}}); !errors.Is(nerr, ErrConfig) {
				t.Errorf("NewLink accepted an invalid config: %v", nerr)
			}
		})
	}
}

func TestConfigJSON(t *testing.T) {
	tests := []struct {
		name string
		json string
		want Config
		err  string
	}{
		{"full", `{"path":"/dev/ttyUSB0","baud":19200,"data_bits":7,"parity":"even","stop_bits":2,
			"silent_after":"2.5s","backoff_min":"50ms","backoff_max":"10s"}`,
			Config{Path: "/dev/ttyUSB0", Baud: 19200, DataBits: 7, Parity: ParityEven, StopBits: StopBitsTwo,
				SilentAfter: Duration(2500 * time.Millisecond), BackoffMin: Duration(50 * time.Millisecond), BackoffMax: Duration(10 * time.Second)}, ""},
		{"usb", `{"usb":{"vid":"0403","pid":"6001","serial":"A10K2"}}`,
			Config{USB: &USBID{VID: "0403", PID: "6001", Serial: "A10K2"}}, ""},
		{"stop bits number 1.5", `{"stop_bits":1.5}`, Config{StopBits: StopBitsOnePointFive}, ""},
		{"stop bits string", `{"stop_bits":"1.5"}`, Config{StopBits: StopBitsOnePointFive}, ""},
		{"stop bits 1.0", `{"stop_bits":1.0}`, Config{StopBits: StopBitsOne}, ""},
		{"silence off", `{"silent_after":"off"}`, Config{SilentAfter: Off}, ""},
		{"silence OFF", `{"silent_after":"OFF"}`, Config{SilentAfter: Off}, ""},
		{"stop bits bool", `{"stop_bits":true}`, Config{}, "stop_bits true"},
		{"duration without unit", `{"silent_after":"3"}`, Config{}, `duration "3"`},
		{"duration number", `{"silent_after":3}`, Config{}, "cannot unmarshal number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got Config
			err := json.Unmarshal([]byte(tt.json), &got)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Unmarshal error %v, want one mentioning %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestConfigMode(t *testing.T) {
	tests := []struct {
		cfg  Config
		want serial.Mode
	}{
		{Config{Path: "/dev/ttyS0"}, serial.Mode{BaudRate: 9600, DataBits: 8, Parity: serial.NoParity, StopBits: serial.OneStopBit}},
		{Config{Path: "/dev/ttyS0", Baud: 115200, DataBits: 7, Parity: "odd", StopBits: "2"},
			serial.Mode{BaudRate: 115200, DataBits: 7, Parity: serial.OddParity, StopBits: serial.TwoStopBits}},
		{Config{Path: "/dev/ttyS0", Parity: "M"}, serial.Mode{BaudRate: 9600, DataBits: 8, Parity: serial.MarkParity, StopBits: serial.OneStopBit}},
		{Config{Path: "/dev/ttyS0", Parity: "SPACE"}, serial.Mode{BaudRate: 9600, DataBits: 8, Parity: serial.SpaceParity, StopBits: serial.OneStopBit}},
	}
	for _, tt := range tests {
		l, err := NewLink(tt.cfg, Options{OnData: func([]byte) {}})
		if err != nil {
			t.Fatal(err)
		}
		if *l.mode != tt.want {
			t.Errorf("%+v: mode %+v, want %+v", tt.cfg, *l.mode, tt.want)
		}
	}
}

func TestNewLinkOptions(t *testing.T) {
	cfg := Config{Path: "/dev/ttyS0"}
	if _, err := NewLink(cfg, Options{}); err == nil {
		t.Error("NewLink accepted no OnData")
	}
	if _, err := NewLink(cfg, Options{OnData: func([]byte) {}, QueueLen: -1}); err == nil {
		t.Error("NewLink accepted a negative QueueLen")
	}
}

// FuzzConfigJSON feeds config files to the decoder: it must never panic,
// and a config that decodes and validates must survive a round trip.
func FuzzConfigJSON(f *testing.F) {
	f.Add([]byte(`{"path":"/dev/ttyUSB0","baud":9600,"parity":"none","stop_bits":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var c Config
		if err := json.Unmarshal(b, &c); err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("Validate error %v does not wrap ErrConfig", err)
			}
			return
		}
		out, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("Marshal %+v: %v", c, err)
		}
		var back Config
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("Unmarshal own output %s: %v", out, err)
		}
		if err := back.Validate(); err != nil {
			t.Fatalf("round trip %s no longer valid: %v", out, err)
		}
		if *back.WithDefaults().mode() != *c.WithDefaults().mode() {
			t.Fatalf("round trip %s changed the line settings", out)
		}
	})
}
