package floorbench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tablectl/tablectl/display/mqttpub"
	"github.com/tablectl/tablectl/floor"
)

// followAlerts reads the floor view's server-sent events (url is its
// /floor/events) and passes on the newest alert id of each of table's
// entries, as a browser on the floor would see them, until ctx ends.
// (floor's BenchmarkAlertToFloorView reads them the same way; a test file
// of package floor cannot import this package, which imports floor.)
func followAlerts(ctx context.Context, url, table string) (<-chan string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("floor view events: %w", err)
	}
	ids := make(chan string, 1024)
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var tv floor.TableView
			if json.Unmarshal([]byte(data), &tv) != nil || tv.Table != table {
				continue
			}
			for _, g := range tv.Alerts {
				select {
				case ids <- g.LatestID:
				default: // nobody waiting: the measure has ended
				}
			}
		}
	}()
	return ids, nil
}

// alertLatencies is what alerting measured: the time from a table's
// publish of an alert to the floor view's event carrying it.
type alertLatencies struct {
	mu  sync.Mutex
	lat []time.Duration
	// lost counts alerts not on the view within the wait.
	lost int
}

// alert publishes, every `every` until ctx ends, a new active alert of
// table on its pit.alerts.active subject (as its bridge lands it) and
// times it to the floor view's event.
func (a *alertLatencies) alert(ctx context.Context, nc *nats.Conn, subject string, seen <-chan string, every time.Duration) {
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
		id := fmt.Sprintf("bench-%d", i)
		at := time.Now()
		p, _ := json.Marshal(map[string]any{"alerts": []mqttpub.Alert{{State: mqttpub.AlertRaised, ID: id, Source: mqttpub.SourceTable,
			Kind: "extra_card", Suspends: true, Message: "9H drawn after the coup was complete", Needs: "resume", At: at.UTC()}}})
		if err := nc.Publish(subject, p); err != nil {
			continue
		}
		ok := waitAlert(ctx, seen, id, 10*time.Second)
		a.mu.Lock()
		if ok {
			a.lat = append(a.lat, time.Since(at))
		} else if ctx.Err() == nil {
			a.lost++
		}
		a.mu.Unlock()
	}
}

func waitAlert(ctx context.Context, seen <-chan string, id string, within time.Duration) bool {
	timeout := time.After(within)
	for {
		select {
		case got := <-seen:
			if got == id {
				return true
			}
		case <-timeout:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// quantiles are p50 and p99 of what was measured, and how many.
func (a *alertLatencies) quantiles() (p50, p99 time.Duration, n, lost int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.lat) == 0 {
		return 0, 0, 0, a.lost
	}
	l := slices.Clone(a.lat)
	slices.Sort(l)
	return l[len(l)/2], l[len(l)*99/100], len(l), a.lost
}
