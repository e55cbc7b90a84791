package mqttconn

import (
	"io"
	"log/slog"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
