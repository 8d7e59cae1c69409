// Live view of GET /metrics, polled every 2 s while the page is open: instances, bus latency, degraded state.
import type { MetricsReport } from '@herald/client';
import { useHeraldClient } from '@herald/client/react';
import { useEffect, useState } from 'react';
import { Alert } from '../components/Form';
import { errorMessage, formatTime } from '../format';

const POLL_MS = 2_000;

export function AdminMetricsPage() {
  const { admin } = useHeraldClient();
  const [report, setReport] = useState<MetricsReport | null>(null);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const poll = async () => {
      try {
        const next = await admin.metrics();
        if (stopped) return;
        setReport(next);
        setError(null);
      } catch (err) {
        if (!stopped) setError(errorMessage(err, 'Could not read metrics'));
      }
      if (!stopped) timer = setTimeout(() => void poll(), POLL_MS);
    };
    void poll();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [admin]);

  return (
    <section className="stack">
      <div className="page-title">
        <h1>Metrics</h1>
        <p className="muted">
          {report ? `Updated ${formatTime(report.timestamp)} from ${report.instanceId}` : ''}
        </p>
      </div>
      <Alert>{error}</Alert>
      {report ? (
        <>
          <div className="stats">
            <div className={report.pubsub.isDegraded ? 'stat bad' : 'stat good'}>
              <span>Bus</span>
              <strong data-testid="bus-state">{report.pubsub.isDegraded ? 'Degraded' : 'Healthy'}</strong>
            </div>
            <div className="stat">
              <span>Mode</span>
              <strong>{report.distributedMode ? 'Distributed' : 'Single instance'}</strong>
            </div>
            <div className="stat">
              <span>Instances</span>
              <strong data-testid="instance-count">{report.cluster.activeInstances}</strong>
            </div>
            <div className="stat">
              <span>Bus latency (avg / max)</span>
              <strong>
                {report.pubsub.averageLatencyMs.toFixed(1)} / {report.pubsub.maxLatencyMs.toFixed(1)} ms
              </strong>
            </div>
            <div className="stat">
              <span>Messages (published / received)</span>
              <strong>
                {report.pubsub.messagesPublished} / {report.pubsub.messagesReceived}
              </strong>
            </div>
            <div className="stat">
              <span>Chat sockets here</span>
              <strong>{report.chat.connectedClients}</strong>
            </div>
          </div>
          <div className="table-wrap">
            <table>
              <caption>Instances</caption>
              <thead>
                <tr>
                  <th scope="col">Instance</th>
                  <th scope="col">Started</th>
                  <th scope="col">Last heartbeat</th>
                  <th scope="col">Chat sockets</th>
                </tr>
              </thead>
              <tbody>
                {report.cluster.instances.map((i) => (
                  <tr key={i.instanceId}>
                    <td>{i.instanceId}</td>
                    <td>{formatTime(i.startedAt)}</td>
                    <td>{formatTime(i.lastHeartbeat)}</td>
                    <td>{i.connectedClients}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </>
      ) : error ? null : (
        <p className="muted">Loading…</p>
      )}
    </section>
  );
}
