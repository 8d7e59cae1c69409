// A secret the service shows only once (an API key, a webhook signing secret): in a read-only field with a copy
// button and a warning, until the admin dismisses it. Nothing keeps it after that, by design.
import { useId, useRef, useState } from 'react';
import { useTexts } from '../locale';

export function ShownOnce({
  heading,
  label,
  value,
  warning,
  copyLabel,
  onDone,
}: {
  heading: string;
  /** The field's accessible name, e.g. "New API key". */
  label: string;
  value: string;
  warning: string;
  copyLabel: string;
  onDone: () => void;
}) {
  const t = useTexts();
  const id = useId();
  const input = useRef<HTMLInputElement>(null);
  const [copied, setCopied] = useState<'yes' | 'failed' | null>(null);

  const copy = async () => {
    try {
      // Absent outside secure contexts (plain http on another host than localhost), refused without permission.
      if (!navigator.clipboard) throw new Error('no clipboard');
      await navigator.clipboard.writeText(value);
      setCopied('yes');
    } catch {
      // Selected instead, so a Ctrl+C is all that is left to do.
      input.current?.select();
      setCopied('failed');
    }
  };

  return (
    <section className="shown-once" aria-labelledby={`${id}-heading`}>
      <h3 id={`${id}-heading`}>{heading}</h3>
      <p className="warning" id={`${id}-warning`}>
        {warning}
      </p>
      <div className="copy-row">
        <label className="sr-only" htmlFor={`${id}-value`}>
          {label}
        </label>
        <input
          ref={input}
          id={`${id}-value`}
          className="secret"
          readOnly
          value={value}
          aria-describedby={`${id}-warning`}
          onFocus={(e) => e.target.select()}
        />
        <button type="button" className="button" onClick={() => void copy()}>
          {copyLabel}
        </button>
        <button type="button" className="button secondary" onClick={onDone}>
          {t.apiKeys.done}
        </button>
      </div>
      <p role="status" className={copied === 'failed' ? 'error' : 'success'}>
        {copied === 'yes' ? t.common.copied : copied === 'failed' ? t.common.copyFailed : ''}
      </p>
    </section>
  );
}
