package managerapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"k8s.io/klog/v2/ktesting"
)

// reasonCases is what every Reason means to a caller, written out by hand:
// TestEveryReasonIsClassified fails when a Reason constant is missing here.
var reasonCases = map[Reason]Answer{
	ReasonBadRequest:          AnswerInvalid,
	ReasonUnauthorized:        AnswerDenied,
	ReasonForbidden:           AnswerDenied,
	ReasonNotFound:            AnswerVolumeMissing,
	ReasonPoolNotFound:        AnswerPoolMissing,
	ReasonMethodNotAllowed:    AnswerInvalid,
	ReasonConflict:            AnswerConflict,
	ReasonOwnerConflict:       AnswerOwnerConflict,
	ReasonNotEmpty:            AnswerNotEmpty,
	ReasonRequestTooLarge:     AnswerInvalid,
	ReasonTooManyRequests:     AnswerBusy,
	ReasonInsufficientStorage: AnswerNoSpace,
	ReasonNotEnforced:         AnswerNotEnforced,
	ReasonInternal:            AnswerServerError,
}

func TestClassify(t *testing.T) {
	type tc struct {
		desc string
		err  error
		want Answer
	}
	cases := []tc{
		{"nil", nil, AnswerOK},
		{"plain error", errors.New("dial tcp 10.0.0.1:8443: connection refused"), AnswerUnreachable},
		{"time limit", fmt.Errorf("DELETE /v1/pools/p/volumes/v: %w", context.DeadlineExceeded), AnswerUnreachable},
		{"cancelled", context.Canceled, AnswerUnreachable},

		// Bare statuses: an *Error without a reason.
		{"bare 400", &Error{StatusCode: 400}, AnswerInvalid},
		{"bare 401", &Error{StatusCode: 401}, AnswerDenied},
		{"bare 403", &Error{StatusCode: 403}, AnswerDenied},
		{"bare 404", &Error{StatusCode: 404}, AnswerVolumeMissing},
		{"bare 405", &Error{StatusCode: 405}, AnswerInvalid},
		{"bare 409", &Error{StatusCode: 409}, AnswerConflict},
		{"bare 413", &Error{StatusCode: 413}, AnswerInvalid},
		{"bare 422", &Error{StatusCode: 422}, AnswerInvalid},
		{"bare 429", &Error{StatusCode: 429}, AnswerBusy},
		{"bare 500", &Error{StatusCode: 500}, AnswerServerError},
		{"bare 502", &Error{StatusCode: 502}, AnswerServerError},
		{"bare 503", &Error{StatusCode: 503}, AnswerServerError},
		{"bare 507", &Error{StatusCode: 507}, AnswerNoSpace},
		{"bare 302", &Error{StatusCode: 302}, AnswerServerError},
		{"no status, no reason", &Error{}, AnswerServerError},
		{"bare 502 wrapped", fmt.Errorf("GET /v1/host: %w", &Error{StatusCode: 502}), AnswerServerError},

		// ReasonInternal with a 4xx: the client's name for a bare status
		// that no reason has.
		{"Internal with 422", &Error{StatusCode: 422, Status: Status{Reason: ReasonInternal}}, AnswerInvalid},
		{"Internal with 418", &Error{StatusCode: 418, Status: Status{Reason: ReasonInternal}}, AnswerInvalid},
		{"Internal with 502", &Error{StatusCode: 502, Status: Status{Reason: ReasonInternal}}, AnswerServerError},

		// The reason wins over the status.
		{"PoolNotFound without a status", &Error{Status: Status{Reason: ReasonPoolNotFound}}, AnswerPoolMissing},
		{"NotEnforced with 400", &Error{StatusCode: 400, Status: Status{Reason: ReasonNotEnforced}}, AnswerNotEnforced},

		// A reason this package does not know: by status, but a 404 or
		// 409 is no missing volume and no known conflict.
		{"unknown reason 404", &Error{StatusCode: 404, Status: Status{Reason: "NodeNotFound"}}, AnswerInvalid},
		{"unknown reason 409", &Error{StatusCode: 409, Status: Status{Reason: "Fenced"}}, AnswerInvalid},
		{"unknown reason 403", &Error{StatusCode: 403, Status: Status{Reason: "Expired"}}, AnswerDenied},
		{"unknown reason 429", &Error{StatusCode: 429, Status: Status{Reason: "Throttled"}}, AnswerBusy},
		{"unknown reason 503", &Error{StatusCode: 503, Status: Status{Reason: "Draining"}}, AnswerServerError},
		{"unknown reason 507", &Error{StatusCode: 507, Status: Status{Reason: "QuotaFull"}}, AnswerNoSpace},
	}
	for r, want := range reasonCases {
		cases = append(cases,
			tc{"reason " + string(r), Errorf(r, "m"), want},
			tc{"reason " + string(r) + " wrapped", fmt.Errorf("PUT /v1/pools/p/volumes/v: %w", Errorf(r, "m")), want},
			tc{"reason " + string(r) + " wrapped twice", fmt.Errorf("node-a: %w", fmt.Errorf("call: %w", Errorf(r, "m"))), want},
		)
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			if got := Classify(c.err); got != c.want {
				t.Errorf("Classify(%v) = %s, want %s", c.err, got, c.want)
			}
		})
	}
}

// TestClassifyThroughClient: the answers of a server, read by the client,
// classify as the reasons and statuses they carry.
func TestClassifyThroughClient(t *testing.T) {
	type tc struct {
		desc string
		code int
		body string
		want Answer
	}
	cases := []tc{
		{"bare 404 from a proxy", 404, "404 page not found", AnswerVolumeMissing},
		{"bare 409", 409, "conflict", AnswerConflict},
		{"bare 422", 422, "unprocessable", AnswerInvalid},
		{"bare 502", 502, "bad gateway", AnswerServerError},
		{"bare 507", 507, "", AnswerNoSpace},
		{"bare 429", 429, "", AnswerBusy},
		{"JSON without a reason, 404", 404, `{"message":"x"}`, AnswerVolumeMissing},
	}
	for r, want := range reasonCases {
		body, err := json.Marshal(Status{Reason: r, Message: "m"})
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, tc{"reason " + string(r), r.HTTPStatus(), string(body), want})
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			err := DeleteAnswered(t, c.code, c.body)
			if got := Classify(err); got != c.want {
				t.Errorf("Classify(%v) = %s, want %s", err, got, c.want)
			}
		})
	}
}

// DeleteAnswered is the error of a DeleteVolume call that the manager
// answers with code and body (exported for the external tests).
func DeleteAnswered(t *testing.T, code int, body string) error {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}))
	defer srv.Close()
	cl, err := New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return cl.DeleteVolume(ctx, "p", "v", DeleteOptions{Owner: "pv-1"})
}

// TestEveryReasonIsClassified fails when a Reason constant is declared (in
// this package's source) without its own case in reasonAnswer, or without
// its expected answer in reasonCases: a new reason must be given a meaning
// on purpose, not fall through to the status.
func TestEveryReasonIsClassified(t *testing.T) {
	reasons := declaredConstants(t, "Reason")
	if len(reasons) < len(reasonCases) {
		t.Fatalf("found %d Reason constants in the source (%v), fewer than the %d of reasonCases: is the parser wrong?", len(reasons), reasons, len(reasonCases))
	}
	for name, value := range reasons {
		r := Reason(value)
		if _, ok := reasonAnswer(r); !ok {
			t.Errorf("%s (%q) has no case in reasonAnswer: Classify would judge it by its status alone", name, value)
		}
		if _, ok := reasonCases[r]; !ok {
			t.Errorf("%s (%q) has no expected answer in reasonCases", name, value)
		}
	}
	if _, ok := reasonAnswer("NoSuchReason"); ok {
		t.Error(`reasonAnswer("NoSuchReason") has a case: the check above proves nothing`)
	}
}

// declaredConstants returns the string constants of the package's
// non-test source declared with type typeName or named typeName+"...",
// by name.
func declaredConstants(t *testing.T, typeName string) map[string]string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]string{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		file, err := parser.ParseFile(fset, f, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range file.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				typed := false
				if id, ok := vs.Type.(*ast.Ident); ok && id.Name == typeName {
					typed = true
				}
				for i, n := range vs.Names {
					if !typed && !strings.HasPrefix(n.Name, typeName) {
						continue
					}
					if i >= len(vs.Values) {
						t.Fatalf("%s: constant %s has no value of its own", f, n.Name)
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Fatalf("%s: constant %s is not a string literal", f, n.Name)
					}
					v, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					consts[n.Name] = v
				}
			}
		}
	}
	return consts
}

// answerConstants counts the constants of the const block that declares
// AnswerOK, in the package's source.
func answerConstants(t *testing.T) int {
	t.Helper()
	file, err := parser.ParseFile(token.NewFileSet(), "answers.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, decl := range file.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST || len(gd.Specs) == 0 {
			continue
		}
		if vs := gd.Specs[0].(*ast.ValueSpec); vs.Names[0].Name != "AnswerOK" {
			continue
		}
		n := 0
		for _, spec := range gd.Specs {
			n += len(spec.(*ast.ValueSpec).Names)
		}
		return n
	}
	t.Fatal("no const block declares AnswerOK in answers.go")
	return 0
}

func TestAnswerRetryable(t *testing.T) {
	want := map[Answer]bool{AnswerUnreachable: true, AnswerBusy: true, AnswerServerError: true}
	n := answerConstants(t)
	for a := range Answer(n) {
		if got := a.Retryable(); got != want[a] {
			t.Errorf("%s.Retryable() = %t, want %t", a, got, want[a])
		}
	}
}

func TestAnswerString(t *testing.T) {
	for _, tc := range []struct {
		a    Answer
		want string
	}{
		{AnswerOK, "OK"},
		{AnswerUnreachable, "Unreachable"},
		{AnswerBusy, "Busy"},
		{AnswerServerError, "ServerError"},
		{AnswerDenied, "Denied"},
		{AnswerOwnerConflict, "OwnerConflict"},
		{AnswerPoolMissing, "PoolMissing"},
		{AnswerVolumeMissing, "VolumeMissing"},
		{AnswerNotEmpty, "NotEmpty"},
		{AnswerNotEnforced, "NotEnforced"},
		{AnswerNoSpace, "NoSpace"},
		{AnswerConflict, "Conflict"},
		{AnswerInvalid, "Invalid"},
		{Answer(99), "Answer(99)"},
		{Answer(-1), "Answer(-1)"},
	} {
		if got := tc.a.String(); got != tc.want {
			t.Errorf("Answer(%d).String() = %q, want %q", int(tc.a), got, tc.want)
		}
	}
	// Every declared answer has a name of its own.
	seen := map[string]Answer{}
	for a := range Answer(answerConstants(t)) {
		s := a.String()
		if strings.HasPrefix(s, "Answer(") {
			t.Errorf("Answer(%d) has no name", int(a))
		}
		if b, dup := seen[s]; dup {
			t.Errorf("Answer(%d) and Answer(%d) are both %q", int(a), int(b), s)
		}
		seen[s] = a
	}
}

func TestOwnerOf(t *testing.T) {
	withOwner := func(r Reason, owner string) *Error {
		e := Errorf(r, "m")
		e.Owner = owner
		return e
	}
	for _, tc := range []struct {
		desc      string
		err       error
		wantOwner string
		wantOK    bool
	}{
		{"owner conflict", withOwner(ReasonOwnerConflict, "pv-a"), "pv-a", true},
		{"owner conflict wrapped", fmt.Errorf("PUT x: %w", withOwner(ReasonOwnerConflict, "pv-a")), "pv-a", true},
		{"directory without a record", withOwner(ReasonOwnerConflict, ""), "", true},
		{"conflict", withOwner(ReasonConflict, "pv-a"), "", false},
		{"unknown 409 reason naming an owner", &Error{StatusCode: 409, Status: Status{Reason: "Fenced", Owner: "pv-a"}}, "", false},
		{"not found", Errorf(ReasonNotFound, "m"), "", false},
		{"nil", nil, "", false},
		{"plain error", errors.New("refused"), "", false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			owner, ok := OwnerOf(tc.err)
			if owner != tc.wantOwner || ok != tc.wantOK {
				t.Errorf("OwnerOf(%v) = %q, %t, want %q, %t", tc.err, owner, ok, tc.wantOwner, tc.wantOK)
			}
		})
	}
}
