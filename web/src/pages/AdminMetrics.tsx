// Live view of GET /metrics, polled every 2 s while the page is open: instances, bus latency, degraded state.
import type { MetricsReport } from '@herald/client';
import { useHeraldClient } from '@herald/client/react';
import { useEffect, useState } from 'react';
import { Alert } from '../components/Form';
import { errorMessage, formatTime } from '../format';
import { useLocale, useTexts } from '../locale';

const POLL_MS = 2_000;

export function AdminMetricsPage() {
  const { admin } = useHeraldClient();
  const [report, setReport] = useState<MetricsReport | null>(null);
  const [error, setError] = useState<unknown>(null);
  const t = useTexts();
  const locale = useLocale();

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
        if (!stopped) setError(err);
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
        <h1>{t.metrics.title}</h1>
        <p className="muted">
          {report ? t.metrics.updated(formatTime(report.timestamp, locale), report.instanceId) : ''}
        </p>
      </div>
      <Alert>{error ? errorMessage(error, t.metrics.failed, t) : null}</Alert>
      {report ? (
        <>
          <div className="stats">
            <div className={report.pubsub.isDegraded ? 'stat bad' : 'stat good'}>
              <span>{t.metrics.bus}</span>
              <strong data-testid="bus-state">
                {report.pubsub.isDegraded ? t.metrics.degraded : t.metrics.healthy}
              </strong>
            </div>
            <div className="stat">
              <span>{t.metrics.mode}</span>
              <strong>{report.distributedMode ? t.metrics.distributed : t.metrics.single}</strong>
            </div>
            <div className="stat">
              <span>{t.metrics.instances}</span>
              <strong data-testid="instance-count">{report.cluster.activeInstances}</strong>
            </div>
            <div className="stat">
              <span>{t.metrics.busLatency}</span>
              <strong>
                {report.pubsub.averageLatencyMs.toFixed(1)} / {report.pubsub.maxLatencyMs.toFixed(1)} ms
              </strong>
            </div>
            <div className="stat">
              <span>{t.metrics.messages}</span>
              <strong>
                {report.pubsub.messagesPublished} / {report.pubsub.messagesReceived}
              </strong>
            </div>
            <div className="stat">
              <span>{t.metrics.chatSockets}</span>
              <strong>{report.chat.connectedClients}</strong>
            </div>
          </div>
          <div className="table-wrap">
            <table>
              <caption>{t.metrics.instances}</caption>
              <thead>
                <tr>
                  <th scope="col">{t.metrics.instance}</th>
                  <th scope="col">{t.metrics.started}</th>
                  <th scope="col">{t.metrics.lastHeartbeat}</th>
                  <th scope="col">{t.metrics.sockets}</th>
                </tr>
              </thead>
              <tbody>
                {report.cluster.instances.map((i) => (
                  <tr key={i.instanceId}>
                    <td>{i.instanceId}</td>
                    <td>{formatTime(i.startedAt, locale)}</td>
                    <td>{formatTime(i.lastHeartbeat, locale)}</td>
                    <td>{i.connectedClients}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </>
      ) : error ? null : (
        <p className="muted">{t.common.loading}</p>
      )}
    </section>
  );
}
