package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"hostpath.dev/api/managerapi"
)

// usageState is what a usageBackend answers: its pools, their volumes, and
// the errors of Host and of ListVolumes per pool.
type usageState struct {
	pools   []managerapi.Pool
	volumes map[string][]managerapi.Volume
	hostErr error
	listErr map[string]error
}

// usageBackend is a fakeBackend (its calls recorded) whose Host and
// ListVolumes answer with its state. Each Host call steps clock by
// readTime, so that a refresh takes that long. When entered is set, the
// first Host call sends on it and waits for release to be closed.
type usageBackend struct {
	fakeBackend
	clock    *clocktesting.FakePassiveClock
	readTime time.Duration
	entered  chan<- struct{}
	release  <-chan struct{}

	stateMu sync.Mutex
	state   usageState
}

func (u *usageBackend) setState(s usageState) {
	u.stateMu.Lock()
	defer u.stateMu.Unlock()
	u.state = s
}

func (u *usageBackend) current() usageState {
	u.stateMu.Lock()
	defer u.stateMu.Unlock()
	return u.state
}

func (u *usageBackend) Host(context.Context) (*managerapi.Host, error) {
	first := len(u.recorded()) == 0
	_ = u.record("Host")
	if first && u.entered != nil {
		u.entered <- struct{}{}
		<-u.release
	}
	if u.clock != nil {
		u.clock.SetTime(u.clock.Now().Add(u.readTime))
	}
	s := u.current()
	if s.hostErr != nil {
		return nil, s.hostErr
	}
	return &managerapi.Host{NodeName: "node-a", Pools: s.pools}, nil
}

func (u *usageBackend) ListVolumes(_ context.Context, pool string, _ ...managerapi.ListOptions) (*managerapi.VolumeList, error) {
	_ = u.record("ListVolumes %s", pool)
	s := u.current()
	if err := s.listErr[pool]; err != nil {
		return nil, err
	}
	return &managerapi.VolumeList{Items: slices.Clone(s.volumes[pool])}, nil
}

// usageSamples are the samples c sends, as NAME{LABEL="VALUE",...} VALUE
// lines, sorted.
func usageSamples(t *testing.T, c prometheus.Collector) []string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	var lines []string
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+strconv.Quote(l.GetValue()))
			}
			lines = append(lines, f.GetName()+"{"+strings.Join(labels, ",")+"} "+strconv.FormatFloat(m.GetGauge().GetValue(), 'f', -1, 64))
		}
	}
	slices.Sort(lines)
	return lines
}

// t0 is the fake time the usage tests start at.
var t0 = time.Unix(1_700_000_000, 0)

// TestUsageRefresh: after each refresh, the collector sends the figures it
// read, of the pools that could be read, with the time the refresh
// completed and how long it took; a failed Host keeps the previous
// figures; before any refresh completes, nothing.
func TestUsageRefresh(t *testing.T) {
	healthy := usageState{
		pools: []managerapi.Pool{
			{Name: "default", Path: "/pools/default", CapacityBytes: 1000, PromisedBytes: 300, AvailableBytes: 700},
			{Name: "fast", Path: "/pools/fast", CapacityBytes: 50, AvailableBytes: 50},
		},
		volumes: map[string][]managerapi.Volume{
			"default": {
				{Name: "enforced", SizeBytes: 200, UsedBytes: ptr.To[int64](20), UsedInodes: ptr.To[int64](3)},
				{Name: "btrfs", SizeBytes: 100, UsedBytes: ptr.To[int64](10)},
				{Name: "unsized"},
			},
		},
	}
	healthyFigures := []string{
		`hostpath_manager_pool_available_bytes{pool="default"} 700`,
		`hostpath_manager_pool_available_bytes{pool="fast"} 50`,
		`hostpath_manager_pool_capacity_bytes{pool="default"} 1000`,
		`hostpath_manager_pool_capacity_bytes{pool="fast"} 50`,
		`hostpath_manager_pool_promised_bytes{pool="default"} 300`,
		`hostpath_manager_pool_promised_bytes{pool="fast"} 0`,
		`hostpath_manager_volume_size_bytes{pool="default",volume="btrfs"} 100`,
		`hostpath_manager_volume_size_bytes{pool="default",volume="enforced"} 200`,
		`hostpath_manager_volume_used_bytes{pool="default",volume="btrfs"} 10`,
		`hostpath_manager_volume_used_bytes{pool="default",volume="enforced"} 20`,
		`hostpath_manager_volume_used_inodes{pool="default",volume="enforced"} 3`,
	}
	// refresh returns the refresh samples of a refresh that took 1.5 s
	// and completed seconds after t0.
	refresh := func(seconds float64) []string {
		return []string{
			`hostpath_manager_usage_refresh_duration_seconds{} 1.5`,
			`hostpath_manager_usage_refresh_timestamp_seconds{} ` + strconv.FormatFloat(float64(t0.Unix())+seconds, 'f', -1, 64),
		}
	}
	with := func(lines ...[]string) []string {
		all := slices.Concat(lines...)
		slices.Sort(all)
		return all
	}
	fastOnly := []string{
		`hostpath_manager_pool_available_bytes{pool="fast"} 50`,
		`hostpath_manager_pool_capacity_bytes{pool="fast"} 50`,
		`hostpath_manager_pool_promised_bytes{pool="fast"} 0`,
	}
	broken := healthy
	broken.pools = slices.Clone(healthy.pools)
	broken.pools[0].Error = "pool directory /pools/default: no such file or directory"
	unlistable := healthy
	unlistable.listErr = map[string]error{"default": errors.New("read /pools/default: input/output error")}
	hostDown := usageState{hostErr: errors.New("read the boot ID: permission denied")}

	for _, tc := range []struct {
		desc string
		// refreshes are the states refreshed in turn, one minute apart
		// from t0 (each read taking 1.5 s).
		refreshes []usageState
		// wantErrs says which refreshes fail.
		wantErrs []bool
		want     []string
	}{
		{desc: "no refresh yet", want: nil},
		{desc: "one refresh", refreshes: []usageState{healthy}, wantErrs: []bool{false}, want: with(healthyFigures, refresh(61.5))},
		{desc: "a pool the host reports broken is left out", refreshes: []usageState{broken}, wantErrs: []bool{false}, want: with(fastOnly, refresh(61.5))},
		{desc: "a pool whose volumes cannot be listed is left out", refreshes: []usageState{unlistable}, wantErrs: []bool{false}, want: with(fastOnly, refresh(61.5))},
		{desc: "a pool that breaks is gone at the next refresh", refreshes: []usageState{healthy, broken}, wantErrs: []bool{false, false}, want: with(fastOnly, refresh(123))},
		{desc: "a pool that heals is back at the next refresh", refreshes: []usageState{unlistable, healthy}, wantErrs: []bool{false, false}, want: with(healthyFigures, refresh(123))},
		{desc: "the host cannot be read at first", refreshes: []usageState{hostDown}, wantErrs: []bool{true}, want: nil},
		{desc: "the host cannot be read: the previous figures stay, with their time", refreshes: []usageState{healthy, hostDown}, wantErrs: []bool{false, true}, want: with(healthyFigures, refresh(61.5))},
		{desc: "the host can be read again", refreshes: []usageState{healthy, hostDown, broken}, wantErrs: []bool{false, true, false}, want: with(fastOnly, refresh(184.5))},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			clk := clocktesting.NewFakePassiveClock(t0)
			b := &usageBackend{clock: clk, readTime: 1500 * time.Millisecond}
			c := newUsageCollector(b)
			c.clock = clk
			for i, s := range tc.refreshes {
				clk.SetTime(clk.Now().Add(time.Minute))
				b.setState(s)
				if err := c.refresh(ctx); (err != nil) != tc.wantErrs[i] {
					t.Errorf("refresh %d: error %v, want an error: %t", i, err, tc.wantErrs[i])
				}
			}
			calls := len(b.recorded())
			if got := usageSamples(t, c); !slices.Equal(got, tc.want) {
				t.Errorf("samples:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			if got := b.recorded()[calls:]; len(got) != 0 {
				t.Errorf("collecting called the backend: %q", got)
			}
		})
	}
}

// TestUsageScrapesReadNoDisk: concurrent scrapes of /metrics, before and
// after a refresh, never call the Backend; they serve the usage figures
// only once a refresh completed.
func TestUsageScrapesReadNoDisk(t *testing.T) {
	const scrapes = 16
	state := usageState{
		pools:   []managerapi.Pool{{Name: "default", Path: "/pools/default", CapacityBytes: 1000}},
		volumes: map[string][]managerapi.Volume{"default": {{Name: "a", SizeBytes: 100, UsedBytes: ptr.To[int64](1)}}},
	}
	for _, tc := range []struct {
		desc      string
		refreshed bool
		// want are lines the scrapes serve, absent those they do not.
		want, absent []string
	}{
		{
			desc:   "before the first refresh",
			absent: []string{"hostpath_manager_pool_", "hostpath_manager_volume_", "hostpath_manager_usage_refresh_"},
		},
		{
			desc:      "after a refresh",
			refreshed: true,
			want: []string{
				`hostpath_manager_pool_capacity_bytes{pool="default"} 1000`,
				`hostpath_manager_volume_used_bytes{pool="default",volume="a"} 1`,
				"hostpath_manager_usage_refresh_timestamp_seconds ",
				"hostpath_manager_usage_refresh_duration_seconds ",
			},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			b := &usageBackend{state: state}
			s, err := New(Config{NodeName: "node-a", Backend: b, Authorizer: &fakeAuthorizer{}})
			if err != nil {
				t.Fatal(err)
			}
			if tc.refreshed {
				if err := s.usage.refresh(ctx); err != nil {
					t.Fatalf("refresh: %v", err)
				}
			}
			before := len(b.recorded())
			bodies := make([]string, scrapes)
			var wg sync.WaitGroup
			for i := range scrapes {
				wg.Go(func() {
					rec := httptest.NewRecorder()
					s.HealthHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
					body, _ := io.ReadAll(rec.Result().Body)
					if rec.Code != http.StatusOK {
						t.Errorf("scrape %d: %d %s", i, rec.Code, body)
					}
					bodies[i] = string(body)
				})
			}
			wg.Wait()
			if got := b.recorded()[before:]; len(got) != 0 {
				t.Errorf("%d scrapes called the backend: %q", scrapes, got)
			}
			for i, body := range bodies {
				for _, w := range tc.want {
					if !strings.Contains(body, "\n"+w) {
						t.Errorf("scrape %d does not serve %q", i, w)
					}
				}
				for _, a := range tc.absent {
					if strings.Contains(body, "\n"+a) {
						t.Errorf("scrape %d serves %q", i, a)
					}
				}
			}
		})
	}
}

// TestRunUsageRefresher: the refresher refreshes at once, a second one
// does not start while it runs, and it stops when its context ends.
func TestRunUsageRefresher(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	entered, release := make(chan struct{}), make(chan struct{})
	b := &usageBackend{entered: entered, release: release, state: usageState{pools: []managerapi.Pool{{Name: "default", CapacityBytes: 1000}}}}
	s, err := New(Config{NodeName: "node-a", Backend: b, Authorizer: &fakeAuthorizer{}, UsageInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.RunUsageRefresher(ctx)
	}()
	<-entered // the first refresh started without waiting for the interval
	// A second refresher returns at once, without reading anything.
	s.RunUsageRefresher(ctx)
	if got := b.recorded(); !slices.Equal(got, []string{"Host"}) {
		t.Errorf("backend calls = %q, want the first refresh's Host only", got)
	}
	// The first refresh, under way, completes (the fake reads ignore the
	// context); the next one is an hour away, and cancel stops the loop.
	close(release)
	cancel()
	<-done
	if got := usageSamples(t, s.usage); !slices.Contains(got, `hostpath_manager_pool_capacity_bytes{pool="default"} 1000`) {
		t.Errorf("samples after the first refresh = %q", got)
	}
}
