package managers

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"hostpath.dev/manager/pkg/client"
)

func managerPod(name, node, ip string, ready bool) *v1.Pod {
	status := v1.ConditionFalse
	if ready {
		status = v1.ConditionTrue
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "sys", Name: name, Labels: map[string]string{"app": "m"}},
		Spec:       v1.PodSpec{NodeName: node},
		Status:     v1.PodStatus{PodIP: ip, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: status}}},
	}
}

func TestResolver(t *testing.T) {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	indexer := factory.Core().V1().Pods().Informer().GetIndexer()
	for _, p := range []*v1.Pod{
		managerPod("m1", "n1", "198.18.1.5", true),
		managerPod("m2", "n2", "198.18.2.5", false),
		managerPod("m3", "n3", "", true),
	} {
		if err := indexer.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	r := NewResolver(factory.Core().V1().Pods().Lister().Pods("sys"), labels.SelectorFromSet(labels.Set{"app": "m"}), 8080)

	c, err := r.ForNode("n1")
	if err != nil || c.BaseURL() != "http://198.18.1.5:8080" {
		t.Fatalf("ForNode(n1) = %v, %v; want http://198.18.1.5:8080", c, err)
	}
	if again, _ := r.ForNode("n1"); again != c {
		t.Errorf("ForNode(n1) made a new client for the same address")
	}
	for _, node := range []string{"n2", "n3", "n4"} {
		var nf *NotFoundError
		if _, err := r.ForNode(node); !errors.As(err, &nf) || nf.Node != node {
			t.Errorf("ForNode(%s) error = %v, want NotFoundError", node, err)
		}
	}
	// A restarted manager pod with a new IP gets a new client.
	if err := indexer.Update(managerPod("m1", "n1", "198.18.1.9", true)); err != nil {
		t.Fatal(err)
	}
	if c, err := r.ForNode("n1"); err != nil || c.BaseURL() != "http://198.18.1.9:8080" {
		t.Errorf("ForNode(n1) after restart = %v, %v; want the new address", c, err)
	}

	static, err := NewStaticResolver("http://127.0.0.1:8080")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := static.ForNode("any"); err != nil || c.BaseURL() != "http://127.0.0.1:8080" {
		t.Errorf("static ForNode = %v, %v", c, err)
	}
}

// TestClientOptions checks that manager clients send the token file's
// current content and give up after the configured time limits, closing the
// connection (the handler sees its request canceled).
func TestClientOptions(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/slow") {
			<-r.Context().Done()
			return
		}
		_ = json.NewEncoder(w).Encode(client.Volume{Name: strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")})
	}))
	defer srv.Close()
	tokenFile := filepath.Join(t.TempDir(), "token")
	writeToken := func(tok string) {
		if err := os.WriteFile(tokenFile, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeToken("first")
	r, err := NewStaticResolver(srv.URL, ClientOptions(tokenFile, 20*time.Millisecond, 40*time.Millisecond)...)
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.ForNode("n1")
	if err != nil {
		t.Fatal(err)
	}
	// Longer than the limits set here, shorter than the defaults.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tok := range []string{"first", "rotated"} {
		writeToken(tok)
		if v, err := c.GetVolume(ctx, "default", "fast"); err != nil || v.Name != tok {
			t.Errorf("GetVolume sent token %v (err %v), want %q", v, err, tok)
		}
	}
	if _, err := c.GetVolume(ctx, "default", "slow"); !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		t.Errorf("GetVolume of a stuck manager = %v, want the call's own deadline exceeded", err)
	}
	if err := c.DeleteVolume(ctx, "default", "slow", client.DeleteOptions{Owner: "pv"}); !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		t.Errorf("DeleteVolume of a stuck manager = %v, want the delete's own deadline exceeded", err)
	}
}

func TestTargets(t *testing.T) {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	indexer := factory.Core().V1().Pods().Informer().GetIndexer()
	terminating := managerPod("m5", "n5", "198.18.5.5", true)
	terminating.DeletionTimestamp = &metav1.Time{}
	for _, p := range []*v1.Pod{
		managerPod("m1", "n1", "198.18.1.5", true),
		managerPod("m2", "n2", "198.18.2.5", false),
		managerPod("m3", "n3", "", true),
		managerPod("m4", "n4", "198.18.4.5", true),
		managerPod("m4-new", "n4", "", false), // rolling update: n4 is still ready
		managerPod("m6", "", "", false),       // not scheduled yet
		terminating,
	} {
		if err := indexer.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	r := NewResolver(factory.Core().V1().Pods().Lister().Pods("sys"), labels.SelectorFromSet(labels.Set{"app": "m"}), 8080)
	ready, pending, err := r.Targets()
	if err != nil || strings.Join(ready, ",") != "n1,n4" || strings.Join(pending, ",") != "n2,n3" {
		t.Errorf("Targets() = %v, %v, %v; want [n1 n4], [n2 n3]", ready, pending, err)
	}
	// Nodes that should run a manager but have none (n7) are pending too;
	// one with a Ready manager (n1) is not.
	r.ExpectOn(func() ([]string, error) { return []string{"n1", "n7"}, nil })
	ready, pending, err = r.Targets()
	if err != nil || strings.Join(ready, ",") != "n1,n4" || strings.Join(pending, ",") != "n2,n3,n7" {
		t.Errorf("Targets() with expected nodes = %v, %v, %v; want [n1 n4], [n2 n3 n7]", ready, pending, err)
	}
	r.ExpectOn(func() ([]string, error) { return nil, errors.New("no pods") })
	if _, _, err := r.Targets(); err == nil || !strings.Contains(err.Error(), "no pods") {
		t.Errorf("Targets() when the expected nodes fail: %v", err)
	}
	static, err := NewStaticResolver("http://127.0.0.1:8080")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := static.Targets(); !errors.Is(err, ErrNoTargets) {
		t.Errorf("static Targets() error = %v, want ErrNoTargets", err)
	}
}
