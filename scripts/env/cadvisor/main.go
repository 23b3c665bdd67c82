// Command cadvisor serves cAdvisor's stats API (v2.0 and v2.1) from cAdvisor's
// own container manager. It is the program of the test image that
// e2e_node.test's Density and Resource-usage specs run as their "cadvisor"
// pod (gcr.io/cadvisor/cadvisor:v0.47.2, hostNetwork, port 8090): their
// resource collector reads the kubelet's and the runtime's cgroups from it
// every half second.
//
// cAdvisor's command lives in its own module (github.com/google/cadvisor/cmd),
// which the Go module proxy does not serve; its library does, at the version
// kubelet links. So this program is the library's manager with the raw cgroup
// factory, which is all the collector needs (it names cgroups, never Docker
// containers), behind the HTTP paths the collector's client calls. The
// collection, the housekeeping and the JSON are cAdvisor's own.
//
// Flags: cAdvisor's library flags (--housekeeping_interval,
// --max_housekeeping_interval, ...), klog's (-logtostderr, -v), and those of
// cAdvisor's command the specs pass: --port and --profiling.
//
// Built by scripts/env/install-cadvisor.sh, for benchmarks only.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/pprof"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/google/cadvisor/cache/memory"
	"github.com/google/cadvisor/container"
	v2 "github.com/google/cadvisor/info/v2"
	"github.com/google/cadvisor/manager"
	"github.com/google/cadvisor/utils/sysfs"
	"k8s.io/klog/v2"
)

var (
	port            = flag.Int("port", 8080, "port to serve the API on (all addresses)")
	profiling       = flag.Bool("profiling", false, "serve Go's profiles under /debug/pprof/")
	storageDuration = flag.Duration("storage_duration", 2*time.Minute, "how long stats are kept in memory")
)

// The collector reads CPU and memory; nothing else is collected, so the pod
// costs the node as little as it can.
var metrics = container.MetricSet{
	container.CpuUsageMetrics:    struct{}{},
	container.MemoryUsageMetrics: struct{}{},
}

func main() {
	klog.InitFlags(nil)
	flag.Parse()

	m, err := manager.New(memory.New(*storageDuration, nil), sysfs.NewRealSysFs(), manager.HousekeepingConfigFlags,
		metrics, http.DefaultClient, []string{"/"}, nil, "", 0)
	if err != nil {
		klog.Fatalf("creating cAdvisor's manager: %v", err)
	}
	if err := m.Start(); err != nil {
		klog.Fatalf("starting cAdvisor's manager: %v", err)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	for _, version := range []string{"v2.0", "v2.1"} {
		prefix := "/api/" + version + "/stats"
		mux.HandleFunc(prefix+"/", func(w http.ResponseWriter, r *http.Request) { serveStats(m, prefix, w, r) })
		mux.HandleFunc("/api/"+version+"/machine", func(w http.ResponseWriter, _ *http.Request) {
			info, err := m.GetMachineInfo()
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			writeJSON(w, info)
		})
	}
	if *profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	klog.Infof("serving cAdvisor's stats API on :%d", *port)
	server := &http.Server{Addr: fmt.Sprintf(":%d", *port), Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	if err := server.ListenAndServe(); err != nil {
		klog.Errorf("serving: %v", err)
		os.Exit(1)
	}
}

// serveStats answers GET <prefix>/<container name>?type=name&count=N&recursive=B
// as cAdvisor does: the named cgroup's recent stats (and its subcontainers'
// when recursive), keyed by container name.
func serveStats(m manager.Manager, prefix string, w http.ResponseWriter, r *http.Request) {
	options, err := requestOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	name := "/" + strings.Trim(strings.TrimPrefix(r.URL.Path, prefix), "/")
	infos, err := m.GetContainerInfoV2(name, options)
	if err != nil {
		// cAdvisor answers with what it has when some subcontainers failed.
		if len(infos) == 0 {
			http.Error(w, fmt.Sprintf("stats of %q: %v", name, err), http.StatusInternalServerError)
			return
		}
		klog.Warningf("stats of %q, in part: %v", name, err)
	}
	writeJSON(w, infos)
}

func requestOptions(r *http.Request) (v2.RequestOptions, error) {
	query := r.URL.Query()
	options := v2.RequestOptions{IdType: v2.TypeName, Count: 64}
	if t := query.Get("type"); t != "" && t != v2.TypeName {
		return options, fmt.Errorf("type %q is not served: this cAdvisor names cgroups only (type=%s)", t, v2.TypeName)
	}
	if c := query.Get("count"); c != "" {
		n, err := strconv.Atoi(c)
		if err != nil || n < -1 {
			return options, fmt.Errorf("count %q is not a number of samples (-1 for all)", c)
		}
		options.Count = n
	}
	if rec := query.Get("recursive"); rec != "" {
		b, err := strconv.ParseBool(rec)
		if err != nil {
			return options, fmt.Errorf("recursive %q is not true or false", rec)
		}
		options.Recursive = b
	}
	if age := query.Get("max_age"); age != "" {
		d, err := time.ParseDuration(age)
		if err != nil || d < 0 {
			return options, fmt.Errorf("max_age %q is not a duration", age)
		}
		options.MaxAge = &d
	}
	return options, nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		klog.Warningf("writing a response: %v", err)
	}
}
