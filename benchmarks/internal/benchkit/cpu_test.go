package benchkit

import (
	"reflect"
	"testing"
	"time"
)

// redisCalls reads the calls of every command of an INFO commandstats
// answer and ignores what is not a command line.
func TestRedisCalls(t *testing.T) {
	for _, tc := range []struct {
		name, info string
		want       map[string]float64
	}{
		{"empty", "# Commandstats\r\n", map[string]float64{}},
		{"two commands",
			"# Commandstats\r\ncmdstat_hset:calls=12,usec=30,usec_per_call=2.50,rejected_calls=0,failed_calls=0\r\n" +
				"cmdstat_evalsha:calls=3,usec=90,usec_per_call=30.00\r\n",
			map[string]float64{"hset": 12, "evalsha": 3}},
		{"not a count", "cmdstat_del:calls=x,usec=1\r\nused_cpu_sys:1.5\r\n", map[string]float64{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := redisCalls(tc.info); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("redisCalls = %v, want %v", got, tc.want)
			}
		})
	}
}

// Sub and Add keep the command counts with the CPU times: a difference
// drops the commands that did not change.
func TestCPUSubAdd(t *testing.T) {
	a := CPU{Self: 3 * time.Second, Redis: time.Second, Calls: map[string]float64{"hset": 10, "del": 2}}
	b := CPU{Self: 5 * time.Second, Redis: 2 * time.Second, Calls: map[string]float64{"hset": 14, "del": 2, "zadd": 1}}
	d := b.Sub(a)
	if want := (CPU{Self: 2 * time.Second, Redis: time.Second, Calls: map[string]float64{"hset": 4, "zadd": 1}}); !reflect.DeepEqual(d, want) {
		t.Fatalf("Sub = %+v, want %+v", d, want)
	}
	s := d.Add(d)
	if want := (CPU{Self: 4 * time.Second, Redis: 2 * time.Second, Calls: map[string]float64{"hset": 8, "zadd": 2}}); !reflect.DeepEqual(s, want) {
		t.Fatalf("Add = %+v, want %+v", s, want)
	}
	if got := (CPU{Self: 1}).Add(CPU{Self: 2}); got.Calls != nil {
		t.Fatalf("Add without counts made %v", got.Calls)
	}
}
