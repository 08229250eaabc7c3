import { CREATURES } from './creatures';
import { mountScene } from './scene';
import './style.css';

const canvas = document.querySelector<HTMLCanvasElement>('#aquarium');
if (!canvas) throw new Error('#aquarium canvas missing from index.html');
mountScene(canvas, CREATURES);
