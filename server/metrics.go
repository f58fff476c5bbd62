package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/anna-search/anna/engine"
)

// metrics are the server's Prometheus series, in a registry of its own.
type metrics struct {
	reg         *prometheus.Registry
	requests    *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	batchJobs   *prometheus.HistogramVec
	batchTexts  *prometheus.HistogramVec
	batchTokens *prometheus.HistogramVec
	docsWritten prometheus.Counter
	embedded    prometheus.Counter
	handler     http.Handler
}

func newMetrics(eng *engine.Engine) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "anna_http_requests_total",
		Help: "HTTP requests answered, by route, method and status code."}, []string{"route", "method", "code"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "anna_http_request_duration_seconds",
		Help: "Time to answer a request, by route.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, []string{"route"})
	m.batchJobs = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "anna_batch_requests",
		Help: "Requests coalesced into one model batch.", Buckets: []float64{1, 2, 4, 8, 16, 32, 64}}, []string{"kind"})
	m.batchTexts = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "anna_batch_texts",
		Help: "Texts (embedding) or documents (rerank) in one model batch.", Buckets: prometheus.ExponentialBuckets(1, 2, 10)}, []string{"kind"})
	m.batchTokens = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "anna_batch_tokens",
		Help: "Model tokens in one batch: texts (embeddings) or pairs (rerank).", Buckets: prometheus.ExponentialBuckets(16, 2, 12)}, []string{"kind"})
	m.docsWritten = prometheus.NewCounter(prometheus.CounterOpts{Name: "anna_documents_written_total",
		Help: "Documents added or updated through POST /v1/documents."})
	m.embedded = prometheus.NewCounter(prometheus.CounterOpts{Name: "anna_embedded_texts_total",
		Help: "Texts embedded through /v1/embeddings."})
	docs := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "anna_documents",
		Help: "Documents in the store."}, func() float64 {
		st, err := eng.Stats()
		if err != nil {
			return -1
		}
		return float64(st.Documents)
	})
	m.reg.MustRegister(m.requests, m.latency, m.batchJobs, m.batchTexts, m.batchTokens, m.docsWritten, m.embedded, docs,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
}

func (m *metrics) observe(route, method string, code int, took time.Duration) {
	m.requests.WithLabelValues(route, method, strconv.Itoa(code)).Inc()
	m.latency.WithLabelValues(route).Observe(took.Seconds())
}

// batchObserver records the size of each batch of kind.
func (m *metrics) batchObserver(kind string) func(jobs, texts, tokens int) {
	return func(jobs, texts, tokens int) {
		m.batchJobs.WithLabelValues(kind).Observe(float64(jobs))
		m.batchTexts.WithLabelValues(kind).Observe(float64(texts))
		if tokens > 0 {
			m.batchTokens.WithLabelValues(kind).Observe(float64(tokens))
		}
	}
}

func (m *metrics) serve(w http.ResponseWriter, r *http.Request) { m.handler.ServeHTTP(w, r) }
