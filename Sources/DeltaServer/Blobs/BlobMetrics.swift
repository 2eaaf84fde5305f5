import Hummingbird
import Prometheus

/// The blobs' metrics (docs/OPERATIONS.md): how many are stored and their bytes (read from the
/// store at each scrape), uploads and downloads with their bytes.
struct BlobMetrics: Sendable {
    /// Blobs stored whole.
    let stored: Gauge
    /// Their bytes.
    let storedBytes: Gauge
    /// Uploads that stored a blob (or found it stored).
    let uploads: Counter
    /// Bytes of those uploads.
    let uploadedBytes: Counter
    /// Those uploads that continued the bytes kept of a cut one (`Upload-Offset`).
    let resumedUploads: Counter
    /// Downloads started (whole or ranges).
    let downloads: Counter
    /// Bytes sent by downloads.
    let downloadedBytes: Counter
    /// Downloads sent from this instance's copy (`--blob-cache`), without reading the database.
    let cacheHits: Counter

    init(registry: PrometheusCollectorRegistry) {
        func gauge(_ name: String, _ unit: String, _ help: String) -> Gauge {
            registry.makeGauge(descriptor: MetricNameDescriptor(metricName: name, unitName: unit, helpText: help))
        }
        func counter(_ name: String, _ unit: String, _ help: String) -> Counter {
            registry.makeCounter(descriptor: MetricNameDescriptor(metricName: name, unitName: unit, helpText: help))
        }
        stored = gauge("deltasnap_blobs", "stored", "Blobs stored whole.")
        storedBytes = gauge("deltasnap_blob", "bytes", "Bytes of the blobs stored.")
        uploads = counter("deltasnap_blob_uploads", "total", "PUT /blobs/{sha256} that stored their blob (or found it stored).")
        uploadedBytes = counter("deltasnap_blob_uploaded", "bytes", "Bytes of those uploads.")
        resumedUploads = counter(
            "deltasnap_blob_uploads_resumed", "total", "Uploads that stored their blob by continuing the bytes kept of a cut one (Upload-Offset).")
        downloads = counter("deltasnap_blob_downloads", "total", "GET /blobs/{sha256} that sent bytes (whole or a range).")
        downloadedBytes = counter("deltasnap_blob_downloaded", "bytes", "Bytes sent by blob downloads.")
        cacheHits = counter("deltasnap_blob_cache_hits", "total", "Blob downloads sent from this instance's copy (--blob-cache), without reading the database.")
    }
}
