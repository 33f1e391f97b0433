package cli

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	var got []string
	commands := map[string]Command{
		"echo": func(_ context.Context, args []string) error { got = args; return nil },
		"fail": func(context.Context, []string) error { return &ExitError{Code: 2, Err: errors.New("boom")} },
	}
	if err := run(context.Background(), "tool", "echo ARGS", commands, []string{"echo", "a", "b"}); err != nil || !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Errorf("echo: %v, args %q", err, got)
	}
	var exit *ExitError
	if err := run(context.Background(), "tool", "echo ARGS", commands, []string{"fail"}); !errors.As(err, &exit) || exit.Code != 2 || err.Error() != "boom" {
		t.Errorf("fail: %v", err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "usage: tool echo ARGS"},
		{[]string{"nope"}, `unknown command "nope" (echo, fail); usage: tool echo ARGS`},
	} {
		if err := run(context.Background(), "tool", "echo ARGS", commands, tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%q) = %v, want %q", tc.args, err, tc.want)
		}
	}
}
