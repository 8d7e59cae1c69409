import { Link } from '../router';

export function NotFoundPage() {
  return (
    <section className="card narrow">
      <h1>Page not found</h1>
      <p>
        Nothing lives at this address. <Link to="/">Go home</Link>
      </p>
    </section>
  );
}
