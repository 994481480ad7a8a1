import { BarController, BarElement, CategoryScale, Chart, Legend, LinearScale, Tooltip } from 'chart.js';
import { useEffect, useRef } from 'preact/hooks';
import { Table } from './ui.js';

Chart.register(BarController, BarElement, CategoryScale, LinearScale, Legend, Tooltip);

export interface Series {
  label: string;
  /** One value per label of the chart, in cents. */
  values: number[];
  /** In the data table only, not drawn: a total beside the stacked parts. */
  tableOnly?: boolean;
}

const PALETTE = ['--chart-1', '--chart-2', '--chart-3', '--chart-4', '--chart-5'];

function cssVar(name: string): string {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || '#888';
}

/**
 * A bar chart of amounts (Chart.js on a canvas, stacked when `stacked`) with its numbers in a
 * table beside it: the canvas is an image to assistive technology, the table is what they read
 * (and what the browser tests read).
 */
export function BarChart(props: { id: string; title: string; category: string; labels: string[]; series: Series[]; stacked?: boolean; format: (cents: number) => string; horizontal?: boolean }) {
  const canvas = useRef<HTMLCanvasElement>(null);
  useEffect(() => {
    if (!canvas.current) return;
    const text = cssVar('--text-muted');
    const grid = cssVar('--border');
    const chart = new Chart(canvas.current, {
      type: 'bar',
      data: {
        labels: props.labels,
        datasets: props.series.filter((series) => !series.tableOnly).map((series, index) => ({
          label: series.label,
          data: series.values.map((cents) => cents / 100),
          backgroundColor: cssVar(PALETTE[index % PALETTE.length]!),
          borderWidth: 0,
        })),
      },
      options: {
        indexAxis: props.horizontal ? 'y' : 'x',
        responsive: true,
        maintainAspectRatio: false,
        animation: false,
        scales: {
          x: { stacked: props.stacked ?? false, ticks: { color: text }, grid: { color: grid } },
          y: { stacked: props.stacked ?? false, ticks: { color: text }, grid: { color: grid }, beginAtZero: true },
        },
        plugins: {
          legend: { display: props.series.filter((series) => !series.tableOnly).length > 1, labels: { color: text } },
          tooltip: { callbacks: { label: (item) => `${item.dataset.label}: ${props.format(Math.round(Number(item.raw) * 100))}` } },
        },
      },
    });
    return () => chart.destroy();
  }, [JSON.stringify([props.labels, props.series, props.stacked])]);
  const summary = props.series.filter((series) => !series.tableOnly).map((series) => `${series.label}: ${props.format(series.values.reduce((sum, value) => sum + value, 0))}`).join('; ');
  return (
    <figure class="chart" id={props.id}>
      <figcaption>
        <h2>{props.title}</h2>
      </figcaption>
      <div class="chart-canvas">
        <canvas ref={canvas} role="img" aria-label={`${props.title}. Totals: ${summary}. The table below lists every value.`} />
      </div>
      <details class="chart-data">
        <summary>Data table: {props.title}</summary>
        <Table caption={props.title} head={[props.category, ...props.series.map((series) => series.label)]} captionHidden>
          {props.labels.map((label, row) => (
            <tr>
              <th scope="row">{label}</th>
              {props.series.map((series) => (
                <td data-cents={series.values[row] ?? 0}>{props.format(series.values[row] ?? 0)}</td>
              ))}
            </tr>
          ))}
        </Table>
      </details>
    </figure>
  );
}
