// The page for a path the page table does not know, with a way back home.
import { useTexts } from '../locale';
import { Link } from '../router';

export function NotFoundPage() {
  const t = useTexts();
  return (
    <section className="card narrow">
      <h1>{t.notFound.title}</h1>
      <p>
        {t.notFound.text} <Link to="/">{t.notFound.home}</Link>
      </p>
    </section>
  );
}
