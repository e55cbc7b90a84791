package controller

import (
	"testing"

	"github.com/tablectl/tablectl/internal/config"
)

func TestClientLimitOff(t *testing.T) {
	if r := clientLimit(&config.MQTTSection{ClientCommandBurst: -1, ClientCommandEvery: 1}); r.Burst != 0 {
		t.Fatalf("a negative burst leaves the limit on: %+v", r)
	}
}
