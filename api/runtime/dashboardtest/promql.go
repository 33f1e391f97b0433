package dashboardtest

import (
	"slices"
	"strings"
)

// keywords are PromQL's words that are not metric names: aggregation
// operators (also when their "by" clause comes first, as in
// `sum by (x) (...)`), modifiers, binary operators and number literals.
// Function names need no list: a name followed by "(" is a function's.
var keywords = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
	"limitk": true, "limit_ratio": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"bool": true, "offset": true, "and": true, "or": true, "unless": true, "atan2": true,
	"inf": true, "nan": true,
}

// labelLists are the keywords followed by a parenthesised list of label
// names.
var labelLists = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

// MetricNames returns the metric names expr selects, in order, each once.
// It is a tokenizer, not a parser: it skips strings, comments, label
// matchers ({...}), ranges ([...]), numbers and durations, Grafana
// variables ($x, ${x}), keywords, the label lists of by, without, on,
// ignoring, group_left and group_right, and names followed by "(", which
// are functions; the names left are metric names.
func MetricNames(expr string) []string {
	var names []string
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			i = skipString(expr, i)
		case c == '#':
			if end := strings.IndexByte(expr[i:], '\n'); end >= 0 {
				i += end
			} else {
				i = len(expr)
			}
		case c == '{':
			i = skipGroup(expr, i, '}')
		case c == '[':
			i = skipGroup(expr, i, ']')
		case c == '$':
			i++
			if i < len(expr) && expr[i] == '{' {
				i = skipGroup(expr, i, '}')
			} else {
				i = skipWord(expr, i)
			}
		case isDigit(c) || c == '.' && i+1 < len(expr) && isDigit(expr[i+1]):
			i = skipWord(expr, i)
		case isNameStart(c):
			end := skipWord(expr, i)
			word, lower := expr[i:end], strings.ToLower(expr[i:end])
			i = end
			j := skipSpace(expr, end)
			call := j < len(expr) && expr[j] == '('
			switch {
			case labelLists[lower] && call:
				i = skipGroup(expr, j, ')')
			case keywords[lower], call: // a keyword or a function
			case !slices.Contains(names, word):
				names = append(names, word)
			}
		default:
			i++
		}
	}
	return names
}

// skipString returns the index past the string literal at expr[i].
func skipString(expr string, i int) int {
	quote := expr[i]
	for i++; i < len(expr); i++ {
		switch {
		case expr[i] == '\\' && quote != '`':
			i++
		case expr[i] == quote:
			return i + 1
		}
	}
	return len(expr)
}

// skipGroup returns the index past the close that ends the group opened at
// expr[i], skipping strings and nested groups of the same kind.
func skipGroup(expr string, i int, close byte) int {
	open := expr[i]
	depth := 0
	for i < len(expr) {
		switch c := expr[i]; {
		case c == '"' || c == '\'' || c == '`':
			i = skipString(expr, i)
			continue
		case c == open:
			depth++
		case c == close:
			depth--
			if depth == 0 {
				return i + 1
			}
		}
		i++
	}
	return len(expr)
}

// skipWord returns the index past the name, number or duration at expr[i].
func skipWord(expr string, i int) int {
	for i < len(expr) && (isNameStart(expr[i]) || isDigit(expr[i]) || expr[i] == '.') {
		i++
	}
	return i
}

// skipSpace returns the index of the first byte from expr[i] on that is not
// white space, or len(expr).
func skipSpace(expr string, i int) int {
	for i < len(expr) && strings.IndexByte(" \t\r\n", expr[i]) >= 0 {
		i++
	}
	return i
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isNameStart(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || c == ':'
}
