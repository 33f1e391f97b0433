package apimetrics

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseAPIRequests(t *testing.T) {
	text := `# HELP apiserver_request_total [STABLE] Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="persistentvolumes",scope="resource",subresource="",verb="POST",version="v1"} 7
apiserver_request_total{code="409",component="apiserver",dry_run="",group="",resource="persistentvolumes",scope="resource",subresource="",verb="POST",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="persistentvolumeclaims",scope="resource",subresource="status",verb="PUT",version="v1"} 3
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 1.2e+06
# HELP apiserver_request_total_other Not this one.
# TYPE apiserver_request_total_other counter
apiserver_request_total_other{verb="POST"} 99
# HELP apiserver_request_duration_seconds [STABLE] Response latency.
# TYPE apiserver_request_duration_seconds histogram
apiserver_request_duration_seconds_bucket{verb="POST",le="0.005"} 4
apiserver_request_duration_seconds_sum{verb="POST"} 0.01
apiserver_request_duration_seconds_count{verb="POST"} 4
this line { is not the text format
`
	got, err := ParseAPIRequests(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := Requests{
		{Verb: "POST", Resource: "persistentvolumes"}:            9,
		{Verb: "PUT", Resource: "persistentvolumeclaims/status"}: 3,
		{Verb: "PUT", Resource: "leases"}:                        1200000,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseAPIRequests = %v, want %v", got, want)
	}
	if got, err := ParseAPIRequests(strings.NewReader("# no requests\nother_total 3\n")); err != nil || len(got) != 0 {
		t.Errorf("ParseAPIRequests without the metric = %v, %v; want none", got, err)
	}
	if _, err := ParseAPIRequests(strings.NewReader(`apiserver_request_total{verb="POST" 3` + "\n")); err == nil {
		t.Error("ParseAPIRequests of a broken sample: no error")
	}
	if _, err := ParseAPIRequests(errReader{}); err == nil {
		t.Error("ParseAPIRequests of a failing reader: no error")
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("boom") }

func TestRequestsSince(t *testing.T) {
	before := Requests{
		{Verb: "POST", Resource: "persistentvolumes"}: 10,
		{Verb: "GET", Resource: "nodes"}:              5,
		{Verb: "PUT", Resource: "leases"}:             100,
		{Verb: "DELETE", Resource: "gone"}:            4,
	}
	after := Requests{
		{Verb: "POST", Resource: "persistentvolumes"}:      1010,
		{Verb: "GET", Resource: "nodes"}:                   5,
		{Verb: "PUT", Resource: "leases"}:                  30, // the API server restarted
		{Verb: "PATCH", Resource: "persistentvolumes"}:     30,
		{Verb: "POST", Resource: "persistentvolumeclaims"}: 1000,
	}
	want := []RequestCount{
		{Verb: "POST", Resource: "persistentvolumeclaims", Count: 1000},
		{Verb: "POST", Resource: "persistentvolumes", Count: 1000},
		{Verb: "PATCH", Resource: "persistentvolumes", Count: 30},
		{Verb: "PUT", Resource: "leases", Count: 30},
	}
	got := after.Since(before)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Since = %+v, want %+v", got, want)
	}
	if n := Total(got); n != 2060 {
		t.Errorf("Total = %d, want 2060", n)
	}
	if got := before.Since(before); got == nil || len(got) != 0 {
		t.Errorf("Since of itself = %#v, want an empty list", got)
	}
}
